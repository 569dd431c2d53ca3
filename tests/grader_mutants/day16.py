"""Day 16: plausible wrong answers to the no-decay parameter groups and to clipping by the total norm."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day16_param_groups_no_decay",
           find="    for _, param in model.named_parameters():\n        if not param.requires_grad:\n            continue\n"
                "        (no_decay if param.ndim <= 1 else decay).append(param)",
           replace="    for name, param in model.named_parameters():\n        if not param.requires_grad:\n            continue\n"
                   "        (no_decay if name.endswith(\"bias\") else decay).append(param)",
           why="exempts parameters named 'bias' only: BatchNorm/LayerNorm scales are still decayed",
           caught_by="day16_param_groups_no_decay_tests"),
    Mutant(cell="day16_param_groups_no_decay",
           find="        if not param.requires_grad:\n            continue\n", replace="",
           why="frozen parameters end up in the optimizer's groups",
           caught_by="day16_param_groups_no_decay_tests"),
    Mutant(cell="day16_param_groups_no_decay",
           find='[{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]',
           replace='[{"params": no_decay, "weight_decay": weight_decay}, {"params": decay, "weight_decay": 0.0}]',
           why="the two groups swapped: biases and norms decayed, weights not",
           caught_by="day16_param_groups_no_decay_tests"),
    Mutant(cell="day16_clip_by_total_norm",
           find="    if total > max_norm:\n        scale = max_norm / (total + 1e-6)\n        for g in grads:\n"
                "            g.mul_(scale)\n",
           replace="    for g in grads:\n        norm = float(g.detach().double().norm())\n        if norm > max_norm:\n"
                   "            g.mul_(max_norm / (norm + 1e-6))\n",
           why="clips each tensor by its own norm: the update changes direction",
           caught_by="day16_clip_by_total_norm_tests"),
    Mutant(cell="day16_clip_by_total_norm",
           find="    if total > max_norm:\n", replace="    if True:\n",
           why="always rescales: gradients below the threshold are scaled up",
           caught_by="day16_clip_by_total_norm_tests"),
    Mutant(cell="day16_clip_by_total_norm",
           find="    return total", replace="    return min(total, max_norm)",
           why="returns the norm after clipping, which hides the spikes it should log",
           caught_by="day16_clip_by_total_norm_tests"),
]
