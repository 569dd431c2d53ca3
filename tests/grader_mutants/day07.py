"""Day 07: plausible wrong answers to the week 1 quiz (one test cell per question) and the baseline project."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day07_quiz_part1",
           find="Q1 = 2", replace="Q1 = 0",
           why="Q1: cuda:0 taken as nvidia-smi's GPU 0 (the listed GPUs are renumbered from 0)",
           caught_by="day07_quiz_q1_tests"),
    Mutant(cell="day07_quiz_part1",
           find='Q2 = "b"', replace='Q2 = "a"',
           why="Q2: a system CUDA toolkit taken as what the wheel needs (it bundles the runtime; the driver is needed)",
           caught_by="day07_quiz_q2_tests"),
    Mutant(cell="day07_quiz_part1",
           find="Q3 = 2e9", replace="Q3 = 1e9",
           why="Q3: n**3 multiply-adds counted as n**3 FLOPs (a multiply-add is 2 FLOPs)",
           caught_by="day07_quiz_q3_tests"),
    Mutant(cell="day07_quiz_part1",
           find='Q4 = "b"', replace='Q4 = "a"',
           why="Q4: GPU-Util read as the share of busy streaming multiprocessors",
           caught_by="day07_quiz_q4_tests"),
    Mutant(cell="day07_quiz_part1",
           find='Q5 = "b"', replace='Q5 = "c"',
           why="Q5: the timer's resolution blamed instead of asynchronous launches",
           caught_by="day07_quiz_q5_tests"),
    Mutant(cell="day07_quiz_part2",
           find="Q6 = 25.6", replace="Q6 = 23.5",
           why="Q6: ResNet50 without its fc layer (2,049,000 parameters) counted",
           caught_by="day07_quiz_q6_tests"),
    Mutant(cell="day07_quiz_part2",
           find='Q7 = "b"', replace='Q7 = "a"',
           why="Q7: normalisation statistics from all the data (a leak)",
           caught_by="day07_quiz_q7_tests"),
    Mutant(cell="day07_quiz_part2",
           find='Q8 = "c"', replace='Q8 = "a"',
           why="Q8: a small rotation taken for the label-changing augmentation",
           caught_by="day07_quiz_q8_tests"),
    Mutant(cell="day07_quiz_part2",
           find="Q9 = 38 / 70", replace="Q9 = (1.0 + 0.5 + 0.5) / 3",
           why="Q9: the mean of the batch accuracies instead of correct samples / samples",
           caught_by="day07_quiz_q9_tests"),
    Mutant(cell="day07_quiz_part2",
           find='Q10 = "a"', replace='Q10 = "b"',
           why="Q10: no_grad taken to change the outputs",
           caught_by="day07_quiz_q10_tests"),
    Mutant(cell="day07_quiz_part2",
           find='Q11 = "b"', replace='Q11 = "a"',
           why="Q11: floating-point arithmetic taken to be random on a CPU",
           caught_by="day07_quiz_q11_tests"),
    Mutant(cell="day07_project",
           find="final_val_accuracy = evaluate(project_model, val_loader, device).accuracy",
           replace='final_val_accuracy = float(history.last["train_accuracy"])',
           why="reported the training accuracy as the validation accuracy",
           caught_by="day07_project_target_tests"),
    Mutant(cell="day07_project",
           find="final_val_accuracy = evaluate(project_model, val_loader, device).accuracy",
           replace='final_val_accuracy = max(r["val_accuracy"] for r in history.records) + 0.05',
           why="reported a number the model does not have (a best epoch, rounded up)",
           caught_by="day07_project_target_tests"),
    Mutant(cell="day07_project",
           find="final_val_accuracy = evaluate(project_model, val_loader, device).accuracy",
           replace="project_model.train()\n"
                   "with torch.no_grad():\n"
                   "    right = sum((project_model(x.to(device)).argmax(1) == y.to(device)).sum().item() for x, y in val_loader)\n"
                   "final_val_accuracy = right / len(data.val)",
           why="measured the validation accuracy in training mode (batch statistics; BatchNorm learns from val)",
           caught_by="day07_project_honest_tests"),
    Mutant(cell="day07_project",
           find="update_bn(project_train, project_model, device=device)",
           replace="update_bn(val_loader, project_model, device=device)",
           why="re-estimated BatchNorm's statistics on the validation split (no gradient, but a leak all the same)",
           caught_by="day07_project_honest_tests"),
    Mutant(cell="day07_project",
           find="history = fit(project_model, project_train, val_loader, optimizer, device, EPOCHS, progress=False)",
           replace="history = fit(project_model, project_train, val_loader, optimizer, device, EPOCHS + 1, progress=False)",
           why="trained a second epoch: over the budget",
           caught_by="day07_project_target_tests"),
    Mutant(cell="day07_project",
           find="history = fit(project_model, project_train, val_loader, optimizer, device, EPOCHS, progress=False)",
           replace="fit(project_model, project_train, val_loader, optimizer, device, EPOCHS, progress=False, verbose=False)\n"
                   "history = fit(project_model, project_train, val_loader, optimizer, device, EPOCHS, progress=False)",
           why="trained again after a first run and kept only the last fit's History: two epochs, over the budget",
           caught_by="day07_project_target_tests"),
    Mutant(cell="day07_project",
           find="history = fit(project_model, project_train, val_loader, optimizer, device, EPOCHS, progress=False)",
           replace="history = fit(project_model, project_train, val_loader, optimizer, device, EPOCHS, progress=False)\n"
                   "from torch.utils.data import DataLoader, TensorDataset\n"
                   "_x, _y = data.train.tensors\n"
                   "noisy = DataLoader(TensorDataset(_x + 0.01 * torch.randn_like(_x), _y), batch_size=BATCH_SIZE,\n"
                   "                   shuffle=True, generator=torch.Generator().manual_seed(SEED))\n"
                   "fit(project_model, noisy, val_loader, optimizer, device, 1, progress=False, verbose=False)",
           why="trained a second epoch on augmented copies (new fingerprints, the same images): over the budget",
           caught_by="day07_project_target_tests"),
    Mutant(cell="day07_project",
           find="history = fit(project_model, project_train, val_loader, optimizer, device, EPOCHS, progress=False)",
           replace="project_model.train()\n"
                   "for _xb, _yb in project_train:\n"
                   "    _xb, _yb = _xb.to(device), _yb.to(device)\n"
                   "    for _ in range(2):\n"
                   "        optimizer.zero_grad(set_to_none=True)\n"
                   "        nn.functional.cross_entropy(project_model(_xb), _yb).backward()\n"
                   "        optimizer.step()",
           why="two optimizer steps on every batch (the same tensor twice): each image in two training steps",
           caught_by="day07_project_target_tests"),
    Mutant(cell="day07_project",
           find="history = fit(project_model, project_train, val_loader, optimizer, device, EPOCHS, progress=False)",
           replace="from torch.utils.data import ConcatDataset, DataLoader\n"
                   "train_and_val = DataLoader(ConcatDataset([data.train, data.val]), batch_size=BATCH_SIZE, shuffle=True,\n"
                   "                           generator=torch.Generator().manual_seed(SEED))\n"
                   "history = fit(project_model, train_and_val, val_loader, optimizer, device, EPOCHS, progress=False)",
           why="trained on the training and validation splits together (the validation score is no longer a measurement)",
           caught_by="day07_project_honest_tests"),
    Mutant(cell="day07_project",
           find="update_bn(project_train, project_model, device=device)",
           replace="update_bn(project_train, project_model, device=device)\n"
                   "fit(project_model, test_loader, val_loader, optimizer, device, 1, progress=False, verbose=False)",
           why="fine-tuned on the test split after the run",
           caught_by="day07_project_honest_tests"),
]
