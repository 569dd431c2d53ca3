"""Day 28 · Evaluation: plausible wrong answers the hidden tests must catch."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day28_average_f1",
           find="return float(f1[occurs].mean())", replace="return float(f1.mean())",
           why="counts a class that never occurs as F1 = 0 in the macro average",
           caught_by="day28_average_f1_tests"),
    Mutant(cell="day28_average_f1",
           find="occurs = (support > 0) | (predicted > 0)", replace="occurs = support > 0",
           why="drops a class that was predicted but never true from the macro average",
           caught_by="day28_average_f1_tests"),
    Mutant(cell="day28_average_f1",
           find="return float((f1 * support).sum() / total)", replace="return float((f1 * predicted).sum() / total)",
           why="weighted average by predicted counts (column sums) instead of support (row sums)",
           caught_by="day28_average_f1_tests"),
    Mutant(cell="day28_average_f1",
           find="return float(cm.diag().sum() / total)",
           replace="return float(classification_report(cm).precision.mean())",
           why="micro average as the mean of per-class precisions (that is macro precision)",
           caught_by="day28_average_f1_tests"),
    Mutant(cell="day28_average_f1",
           find="return float(f1[occurs].mean())", replace="return float(f1[f1 > 0].mean())",
           why="leaves every class with F1 = 0 out of the macro average, also classes that occur",
           caught_by="day28_average_f1_tests"),
    Mutant(cell="day28_average_f1",
           find="    f1 = classification_report(cm).f1\n",
           replace="    f1 = torch.tensor([2 * float(cm[c, c]) / float(support[c] + predicted[c])\n"
                   "                       if float(support[c] + predicted[c]) > 0 else 0.0 for c in range(len(cm))],\n"
                   "                      dtype=torch.float64)\n",
           why="per-class F1 (2TP / (support + predicted)) in a Python loop that reads every class's counts back",
           caught_by="day28_average_f1_tests"),
    Mutant(cell="day28_average_f1",
           find="    f1 = classification_report(cm).f1\n",
           replace="    f1 = torch.stack([torch.where(support[c] + predicted[c] > 0,\n"
                   "                                  2 * cm[c, c] / (support[c] + predicted[c]).clamp(min=1),\n"
                   "                                  cm.new_zeros(())) for c in range(len(cm))])\n",
           why="per-class F1 in a Python loop of tensor operations: no reads, but operations (kernel launches on a "
               "GPU) grow with the number of classes",
           caught_by="day28_average_f1_tests"),
    Mutant(cell="day28_average_f1",
           find="    occurs = (support > 0) | (predicted > 0)",
           replace="    occurs = [c for c in range(len(cm)) if support[c] > 0 or predicted[c] > 0]",
           why="finds the classes that occur with an `if` per class: one read per class",
           caught_by="day28_average_f1_tests"),
    Mutant(cell="day28_average_f1",
           find="return float(cm.diag().sum() / total)",
           replace="return sum(float(cm[c, c]) for c in range(len(cm))) / float(total)",
           why="micro F1 (accuracy) summed class by class in Python: one read per class",
           caught_by="day28_average_f1_tests"),
    Mutant(cell="day28_average_f1",
           find='    if total <= 0:\n        raise ValueError("the confusion matrix holds no samples: there is nothing to '
                'average")\n',
           replace="",
           why="a matrix without samples returns nan instead of raising",
           caught_by="day28_average_f1_tests"),
    Mutant(cell="day28_evaluate",
           find='loss_sum += F.cross_entropy(logits.float(), labels, reduction="sum")',
           replace='loss_sum += F.cross_entropy(logits.float(), labels, reduction="sum").item()',
           why="reads the loss back with .item() on every batch",
           caught_by="day28_evaluate_tests"),
    Mutant(cell="day28_evaluate",
           find="                cm.scatter_add_(0, pairs, torch.ones_like(pairs))    # a fixed size: nothing is read back\n",
           replace="                cm = cm.cpu()\n"
                   "                cm.scatter_add_(0, pairs.cpu(), torch.ones_like(pairs.cpu()))\n",
           why="copies the counts to the CPU inside the loop",
           caught_by="day28_evaluate_tests"),
    Mutant(cell="day28_evaluate",
           find="                cm.scatter_add_(0, pairs, torch.ones_like(pairs))    # a fixed size: nothing is read back\n",
           replace="                cm += torch.bincount(pairs, minlength=num_classes ** 2)\n",
           why="counts each batch with torch.bincount: its output size comes from the data's maximum, read back to "
               "the host on every batch",
           caught_by="day28_evaluate_tests"),
    Mutant(cell="day28_evaluate",
           find="                cm.scatter_add_(0, pairs, torch.ones_like(pairs))    # a fixed size: nothing is read back\n",
           replace="                if seen == 0:\n"
                   "                    from torchmetrics.classification import MulticlassConfusionMatrix\n"
                   "                    confmat = MulticlassConfusionMatrix(num_classes).to(device)\n"
                   "                confmat.update(logits.argmax(dim=1), labels)\n"
                   "                cm = confmat.confmat.reshape(-1)\n",
           why="accumulates with a torchmetrics confusion matrix, whose update() calls bincount and unique on every "
               "batch",
           caught_by="day28_evaluate_tests"),
    Mutant(cell="day28_evaluate",
           find="pairs = labels * num_classes + logits.argmax(dim=1)",
           replace="pairs = logits.argmax(dim=1) * num_classes + labels",
           why="rows are the predictions: the matrix is transposed",
           caught_by="day28_evaluate_tests"),
    Mutant(cell="day28_evaluate",
           find='loss_sum += F.cross_entropy(logits.float(), labels, reduction="sum")\n'
                "                pairs = labels * num_classes + logits.argmax(dim=1)\n"
                "                cm.scatter_add_(0, pairs, torch.ones_like(pairs))    # a fixed size: nothing is read back\n"
                "                seen += len(labels)",
           replace='loss_sum += F.cross_entropy(logits.float(), labels)\n'
                   "                pairs = labels * num_classes + logits.argmax(dim=1)\n"
                   "                cm.scatter_add_(0, pairs, torch.ones_like(pairs))\n"
                   "                seen += 1",
           why="mean of the batch means: a smaller last batch weighs as much as a full one",
           caught_by="day28_evaluate_tests"),
    Mutant(cell="day28_evaluate",
           find="    model.eval()\n", replace="",
           why="forgot model.eval(): BatchNorm uses and updates batch statistics",
           caught_by="day28_evaluate_tests"),
    Mutant(cell="day28_evaluate",
           find="        model.train(was_training)", replace="        pass",
           why="leaves the model in eval mode after evaluating it in the middle of training",
           caught_by="day28_evaluate_tests"),
    Mutant(cell="day28_evaluate",
           find="with torch.inference_mode():", replace="with torch.enable_grad():",
           why="evaluates with autograd on (builds a graph for every batch)",
           caught_by="day28_evaluate_tests"),
    Mutant(cell="day28_evaluate",
           find="    seen = 0\n", replace="    seen = 0\n    total = sum(len(y) for _, y in loader)   # count first\n",
           why="counts the samples in a first pass over the loader",
           caught_by="day28_evaluate_tests"),
    Mutant(cell="day28_evaluate",
           find='    if seen == 0:\n        raise ValueError("the loader yielded no samples: nothing to evaluate")\n',
           replace="",
           why="an empty loader divides by zero instead of raising ValueError",
           caught_by="day28_evaluate_tests"),
]
