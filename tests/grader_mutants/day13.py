"""Day 13 · Activation checkpointing: plausible wrong answers the hidden tests must catch."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day13_checkpoint_blocks", find="        size = base + (1 if s < extra else 0)\n",
           replace="        size = base + (1 if s >= segments - extra else 0)\n",
           why="put the longer segments last", caught_by="day13_checkpoint_blocks_tests"),
    Mutant(cell="day13_checkpoint_blocks", find="        x = checkpoint(run_, x, use_reentrant=False)\n",
           replace="        x = checkpoint(run_, x, use_reentrant=False) if s < segments - 1 else run_(x)\n",
           why="left the last segment unchecked, like checkpoint_sequential", caught_by="day13_checkpoint_blocks_tests"),
    Mutant(cell="day13_checkpoint_blocks", find="use_reentrant=False", replace="use_reentrant=True",
           why="the reentrant checkpoint: no parameter gradients when the input does not require grad",
           caught_by="day13_checkpoint_blocks_tests"),
    Mutant(cell="day13_checkpoint_blocks", find="    if segments < 1 or segments > n:\n", replace="    if segments < 1:\n",
           why="accepted more segments than blocks", caught_by="day13_checkpoint_blocks_tests"),
    Mutant(cell="day13_checkpoint_peak_bytes",
           find="        stored += input_bytes[start]            # inputs of this segment and of every earlier one are still stored\n"
                "        peak = max(peak, stored + sum(block_bytes[start:start + size]))\n",
           replace="        stored += input_bytes[start]\n        peak = max(peak, sum(block_bytes[start:start + size]))\n",
           why="kept the stored inputs out of the peak", caught_by="day13_checkpoint_peak_bytes_tests"),
    Mutant(cell="day13_checkpoint_peak_bytes",
           find="        peak = max(peak, stored + sum(block_bytes[start:start + size]))\n        start += size\n"
                "    return int(peak)\n",
           replace="        peak = max(peak, sum(block_bytes[start:start + size]))\n        start += size\n"
                   "    return int(stored + peak)\n",
           why="every stored input counted for the whole backward pass (all inputs + the largest segment)",
           caught_by="day13_checkpoint_peak_bytes_tests"),
    Mutant(cell="day13_checkpoint_peak_bytes", find="stored + sum(block_bytes[start:start + size])",
           replace="stored + max(block_bytes[start:start + size])",
           why="one block alive during a recompute instead of the whole segment",
           caught_by="day13_checkpoint_peak_bytes_tests"),
    Mutant(cell="day13_choose_checkpoints",
           find="    for _, names in options:\n        if saved_bytes(set(names)) <= budget_bytes:\n            return set(names)\n",
           replace="    if saved_bytes(set(RESIDUAL_STAGES)) <= budget_bytes:\n        return set(RESIDUAL_STAGES)\n",
           why="checkpointed every stage whatever the budget", caught_by="day13_choose_checkpoints_tests"),
    Mutant(cell="day13_choose_checkpoints",
           find="    for _, names in options:\n        if saved_bytes(set(names)) <= budget_bytes:\n            return set(names)\n",
           replace="    chosen = set()\n    for name in sorted(RESIDUAL_STAGES, key=lambda n: flops[n]):\n"
                   "        if saved_bytes(chosen) <= budget_bytes:\n            return chosen\n        chosen.add(name)\n"
                   "    if saved_bytes(chosen) <= budget_bytes:\n        return chosen\n",
           why="greedy: added the cheapest stage to recompute until it fit", caught_by="day13_choose_checkpoints_tests"),
    Mutant(cell="day13_choose_checkpoints", find="if saved_bytes(set(names)) <= budget_bytes:",
           replace="if saved_bytes(set(names)) < budget_bytes:",
           why="a strict budget", caught_by="day13_choose_checkpoints_tests"),
    Mutant(cell="day13_choose_checkpoints",
           find="                b.copy_(buffers[name])\n", replace="                pass\n",
           why="probed the model itself and left BatchNorm's running statistics moved by every probe pass",
           caught_by="day13_choose_checkpoints_tests"),
    Mutant(cell="day13_choose_checkpoints",
           find="    buffers = {name: b.clone() for name, b in m.named_buffers()}",
           replace="    buffers = dict(m.named_buffers())",
           why="kept references to the buffers instead of copies: the 'snapshot' moved with them",
           caught_by="day13_choose_checkpoints_tests"),
    Mutant(cell="day13_choose_checkpoints",
           find="        m.train(was_training)\n", replace="",
           why="left the model in training mode after probing",
           caught_by="day13_choose_checkpoints_tests"),
    Mutant(cell="day13_choose_checkpoints",
           find="    with torch.no_grad():\n        stage_forward(m, x, count)\n",
           replace="    stage_forward(m, x, count).sum().backward()     # a whole probe step\n",
           why="counted the stages' FLOPs in a probe step with a backward pass (it adds to the parameters' .grad)",
           caught_by="day13_choose_checkpoints_tests"),
    Mutant(cell="day13_choose_checkpoints",
           find="    try:\n        return _cheapest_fit(m, x, budget_bytes)\n    finally:\n"
                "        with torch.no_grad():\n            for name, b in m.named_buffers():\n"
                "                b.copy_(buffers[name])\n        m.train(was_training)\n",
           replace="    chosen = _cheapest_fit(m, x, budget_bytes)\n    with torch.no_grad():\n"
                   "        for name, b in m.named_buffers():\n            b.copy_(buffers[name])\n"
                   "    m.train(was_training)\n    return chosen\n",
           why="restored the buffers and the mode on a normal return only (no finally): a call that raises "
               "ValueError leaves the probe passes' BatchNorm statistics and training mode behind",
           caught_by="day13_choose_checkpoints_tests"),
    Mutant(cell="day13_choose_checkpoints",
         find="    for _, names in options:\n        if saved_bytes(set(names)) <= budget_bytes:\n",
         replace="    options = sorted(((len(n), saved_bytes(set(n)), n) for *_, n in options))\n"
                 "    for *_, names in options:\n        if saved_bytes(set(names)) <= budget_bytes:\n",
         why="checkpointed the fewest stages, the one that saves the most first: FLOPs never compared (at layer2's "
             "bytes, layer1 alone fits too and recomputes more)",
         caught_by="day13_choose_checkpoints_tests"),
    Mutant(cell="day13_choose_checkpoints",
         find='    options = sorted((sum(flops[n] for n in names), names)\n                     for r in range(len(RESIDUAL_STAGES) + 1) for names in itertools.combinations(RESIDUAL_STAGES, r))\n    for _, names in options:\n',
         replace='    options = sorted((len(names), sum(flops[n] for n in names), names)\n                     for r in range(len(RESIDUAL_STAGES) + 1) for names in itertools.combinations(RESIDUAL_STAGES, r))\n    for *_, names in options:\n',
         why="fewest stages first, FLOPs only to break ties: one expensive stage beats two cheap ones that fit",
         caught_by="day13_choose_checkpoints_tests"),
]
