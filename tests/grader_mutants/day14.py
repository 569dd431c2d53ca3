"""Day 14 · Week 2 project: plausible wrong answers the hidden tests must catch."""
from grader_mutants import Mutant

_SCAN = ("    best = 0\n    for b in range(1, logical_batch + 1):\n        if logical_batch % b == 0 and predict_peak(b) <= budget:\n"
         "            best = b\n    return best\n")

MUTANTS = [
    Mutant(cell="day14_activation_bytes", find="acts += max(f + q * b for f, q in stage_lines)",
           replace="acts += max(f + q * 4 for f, q in stage_lines)",
           why="took the recomputed stage's bytes at the probe size, not at micro-batch b",
           caught_by="day14_activation_bytes_tests"),
    Mutant(cell="day14_activation_bytes", find="acts += max(f + q * b for f, q in stage_lines)",
           replace="acts += sum(f + q * b for f, q in stage_lines)",
           why="added every stage's recomputation, though backward recomputes one stage at a time",
           caught_by="day14_activation_bytes_tests"),
    Mutant(cell="day14_activation_bytes",
           find="    if checkpointing:\n        acts += max(f + q * b for f, q in stage_lines)      # the stage recomputed during backward\n",
           replace="",
           why="used the checkpointed forward pass's bytes as the peak, forgetting the recomputation in backward",
           caught_by="day14_activation_bytes_tests"),
    Mutant(cell="day14_activation_bytes",
           find="    (fixed, per_sample), stage_lines = lines[key]\n    acts = fixed + per_sample * b\n",
           replace="    acts = forward_saved(xb[:b], precision, checkpointing)\n"
                   "    stage_lines = [(s, 0.0) for s in stage_saved(xb[:b], precision)] if checkpointing else []\n",
           why="measured at the target micro-batch instead of predicting it from the probes",
           caught_by="day14_activation_bytes_tests"),
    Mutant(cell="day14_activation_bytes", find="acts = fixed + per_sample * b",
           replace="acts = (fixed + per_sample * 4) / 4 * b",
           why="scaled the probe proportionally, dropping the fixed part (BatchNorm statistics, autocast's weight copies)",
           caught_by="day14_activation_bytes_tests"),
    Mutant(cell="day14_activation_bytes", find="    if key not in lines:\n", replace="    if True:\n",
           why="probed again on every call", caught_by="day14_activation_bytes_tests"),
    Mutant(cell="day14_max_micro_batch", find=_SCAN,
           replace="    best = 0\n    for b in [d for d in range(1, logical_batch + 1) if logical_batch % d == 0]:\n"
                   "        if predict_peak(b) > budget:\n            break\n        best = b\n    return best\n",
           why="stopped at the first divisor that does not fit, assuming memory only grows",
           caught_by="day14_max_micro_batch_tests"),
    Mutant(cell="day14_max_micro_batch", find=_SCAN,
           replace="    divisors = [d for d in range(1, logical_batch + 1) if logical_batch % d == 0]\n"
                   "    lo, hi = -1, len(divisors)\n    while hi - lo > 1:\n        mid = (lo + hi) // 2\n"
                   "        if predict_peak(divisors[mid]) <= budget:\n            lo = mid\n        else:\n            hi = mid\n"
                   "    return divisors[lo] if lo >= 0 else 0\n",
           why="a bisection over the divisors, which assumes the peak is monotone",
           caught_by="day14_max_micro_batch_tests"),
    Mutant(cell="day14_max_micro_batch", find="if logical_batch % b == 0 and predict_peak(b) <= budget:",
           replace="if predict_peak(b) <= budget:",
           why="ignored that the micro-batch must divide the logical batch", caught_by="day14_max_micro_batch_tests"),
    Mutant(cell="day14_max_micro_batch", find="predict_peak(b) <= budget:", replace="predict_peak(b) < budget:",
           why="a strict budget", caught_by="day14_max_micro_batch_tests"),
    Mutant(cell="day14_project_search", find='itertools.product(("fp32", "low"), (False, True))',
           replace='itertools.product(("fp32",), (False, True))',
           why="searched fp32 only", caught_by="day14_project_budget_tests"),
    Mutant(cell="day14_project_search", find="    b = max_micro_batch(predictor(precision, ckpt), BUDGET, LOGICAL_BATCH)\n",
           replace="    b = min(1, max_micro_batch(predictor(precision, ckpt), BUDGET, LOGICAL_BATCH))\n",
           why="kept micro-batch 1 instead of the largest that fits", caught_by="day14_project_budget_tests"),
]
