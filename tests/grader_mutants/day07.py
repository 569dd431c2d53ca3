"""Day 07: plausible wrong answers to the week 1 quiz and the baseline project."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day07_quiz_part1",
           find="Q1 = 2", replace="Q1 = 0",
           why="Q1: cuda:0 taken as nvidia-smi's GPU 0 (the listed GPUs are renumbered from 0)",
           caught_by="day07_quiz_part1_tests"),
    Mutant(cell="day07_quiz_part1",
           find="Q3 = 2e9", replace="Q3 = 1e9",
           why="Q3: n**3 multiply-adds counted as n**3 FLOPs (a multiply-add is 2 FLOPs)",
           caught_by="day07_quiz_part1_tests"),
    Mutant(cell="day07_quiz_part2",
           find="Q9 = 38 / 70", replace="Q9 = (1.0 + 0.5 + 0.5) / 3",
           why="Q9: the mean of the batch accuracies instead of correct samples / samples",
           caught_by="day07_quiz_part2_tests"),
    Mutant(cell="day07_quiz_part2",
           find='Q10 = "a"', replace='Q10 = "b"',
           why="Q10: no_grad taken to change the outputs",
           caught_by="day07_quiz_part2_tests"),
    Mutant(cell="day07_project",
           find='final_val_accuracy = float(history.last["val_accuracy"])',
           replace='final_val_accuracy = float(history.last["train_accuracy"])',
           why="reported the training accuracy as the validation accuracy",
           caught_by="day07_project_target_tests"),
    Mutant(cell="day07_project",
           find="history = fit(project_model, train_loader, val_loader, optimizer, device, EPOCHS, progress=False)",
           replace="history = fit(project_model, train_loader, val_loader, optimizer, device, EPOCHS, progress=False)\n"
                   "history = fit(project_model, train_loader, val_loader, optimizer, device, 1, progress=False)",
           why="trained again after the run and kept only the last fit's History (not EPOCHS epochs)",
           caught_by="day07_project_honest_tests"),
]
