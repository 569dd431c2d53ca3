"""Day 06: plausible wrong answers to train_one_epoch and evaluate."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day06_train_one_epoch",
           find="        optimizer.zero_grad(set_to_none=True)\n", replace="",
           why="no zero_grad: gradients accumulate over the batches (and start from stale ones)",
           caught_by="day06_train_one_epoch_tests"),
    Mutant(cell="day06_train_one_epoch",
           find="    model.train()\n", replace="",
           why="no model.train(): a model left in eval mode trains with frozen BatchNorm statistics",
           caught_by="day06_train_one_epoch_tests"),
    Mutant(cell="day06_train_one_epoch",
           find="total_loss += loss.item() * n\n"
                "        correct += (outputs.argmax(dim=1) == targets).sum().item()\n"
                "        seen += n\n"
                "    return total_loss / seen, correct / seen",
           replace="total_loss += loss.item()\n"
                   "        correct += (outputs.argmax(dim=1) == targets).sum().item()\n"
                   "        seen += n\n"
                   "    return total_loss / len(loader), correct / seen",
           why="the loss is a mean of batch means, not weighted by batch size (the last batch is smaller)",
           caught_by="day06_train_one_epoch_tests"),
    Mutant(cell="day06_evaluate",
           find="    model.eval()\n", replace="",
           why="no model.eval(): Dropout stays on and BatchNorm updates its running statistics",
           caught_by="day06_evaluate_tests"),
    Mutant(cell="day06_evaluate",
           find="with torch.inference_mode():", replace="if True:",
           why="the forward passes record autograd graphs (no inference_mode or no_grad)",
           caught_by="day06_evaluate_tests"),
    Mutant(cell="day06_evaluate",
           find="correct += (outputs.argmax(dim=1) == targets).sum().item()\n"
                "            seen += n\n"
                "    for m, training in modes.items():\n"
                "        m.training = training\n"
                "    return total_loss / seen, correct / seen",
           replace="correct += (outputs.argmax(dim=1) == targets).float().mean().item()\n"
                   "            seen += n\n"
                   "    for m, training in modes.items():\n"
                   "        m.training = training\n"
                   "    return total_loss / seen, correct / len(loader)",
           why="the accuracy is a mean of batch accuracies, not correct samples / samples",
           caught_by="day06_evaluate_tests"),
    Mutant(cell="day06_train_one_epoch",
           find="images, targets = images.to(device), targets.to(device)", replace="pass",
           why="forgot to move the batch to the device (invisible on a CPU, a crash on the first GPU)",
           caught_by="day06_train_one_epoch_tests"),
    Mutant(cell="day06_train_one_epoch",
           find="images, targets = images.to(device), targets.to(device)", replace="images = images.to(device)",
           why="moved the images but not the targets",
           caught_by="day06_train_one_epoch_tests"),
    Mutant(cell="day06_evaluate",
           find="images, targets = images.to(device), targets.to(device)", replace="pass",
           why="forgot to move the batch to the device in the evaluation loop",
           caught_by="day06_evaluate_tests"),
    Mutant(cell="day06_evaluate",
           find="    for m, training in modes.items():\n        m.training = training\n", replace="",
           why="left the model in eval mode: the caller's next epoch trains with frozen BatchNorm and no Dropout",
           caught_by="day06_evaluate_tests"),
    Mutant(cell="day06_evaluate",
           find="    for m, training in modes.items():\n        m.training = training\n",
           replace="    model.train(modes[model])\n",
           why="restored the model's own mode with model.train(was_training), which wakes up a frozen BatchNorm",
           caught_by="day06_evaluate_tests"),
    Mutant(cell="day06_train_one_epoch", find="    return total_loss / seen, correct / seen",
           replace="    return total_loss / len(loader.dataset), correct / len(loader.dataset)",
           why="divided by len(loader.dataset): a loader with drop_last=True (or a sampler) yields fewer samples",
           caught_by="day06_train_one_epoch_tests"),
    Mutant(cell="day06_evaluate", find="    return total_loss / seen, correct / seen",
           replace="    return total_loss / len(loader.dataset), correct / len(loader.dataset)",
           why="divided by len(loader.dataset) in evaluation: a drop_last loader's missing samples count as wrong",
           caught_by="day06_evaluate_tests"),
    Mutant(cell='day06_evaluate',
           find="    modes = {m: m.training for m in model.modules()}     # every submodule's mode, restored at the end\n    model.eval()\n    total_loss, correct, seen = 0.0, 0, 0\n    with torch.inference_mode():\n        for images, targets in loader:\n            images, targets = images.to(device), targets.to(device)\n            outputs = model(images)\n            n = targets.shape[0]\n            total_loss += loss_fn(outputs, targets).item() * n\n            correct += (outputs.argmax(dim=1) == targets).sum().item()\n            seen += n\n    for m, training in modes.items():\n        m.training = training\n",
           replace='    was_training = model.training\n    modes = {m: m.training for m in model.children()}\n    model.eval()\n    total_loss, correct, seen = 0.0, 0, 0\n    with torch.inference_mode():\n        for images, targets in loader:\n            images, targets = images.to(device), targets.to(device)\n            outputs = model(images)\n            n = targets.shape[0]\n            total_loss += loss_fn(outputs, targets).item() * n\n            correct += (outputs.argmax(dim=1) == targets).sum().item()\n            seen += n\n    model.train(was_training)\n    for m, training in modes.items():\n        m.train(training)\n',
           why='restored the modes of model.children() only: a frozen BatchNorm one level deeper is put back in training mode',
           caught_by='day06_evaluate_tests'),
    Mutant(cell='day06_evaluate',
           find='    with torch.inference_mode():\n',
           replace='    torch.set_grad_enabled(False)\n    if True:\n',
           why="switches autograd off with torch.set_grad_enabled(False) and never back on: evaluate returns with autograd disabled for the whole program, and the caller's next training epoch cannot backward (state not restored)",
           caught_by='day06_evaluate_tests'),
    Mutant(cell='day06_train_one_epoch',
           find='        loss = loss_fn(outputs, targets)\n',
           replace='        loss = nn.functional.cross_entropy(outputs, targets)\n',
           why="ignores the loss_fn argument and hard-codes cross-entropy: every test passes nn.CrossEntropyLoss(), so a caller's label smoothing, class weights or other loss is silently dropped",
           caught_by='day06_train_one_epoch_tests'),
    Mutant(cell='day06_evaluate',
           find='            total_loss += loss_fn(outputs, targets).item() * n\n',
           replace='            total_loss += nn.functional.cross_entropy(outputs, targets).item() * n\n',
           why='ignores the loss_fn argument and hard-codes cross-entropy in evaluation (same mistake as in train_one_epoch)',
           caught_by='day06_evaluate_tests'),
]
