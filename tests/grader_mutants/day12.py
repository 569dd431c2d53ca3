"""Day 12 · Gradient accumulation: plausible wrong answers the hidden tests must catch."""
from grader_mutants import Mutant

_LOOP = ("    for x, y in micro_batches:\n        weight = y.shape[0] / total\n        loss = loss_fn(model(x), y) * weight\n"
         "        loss.backward()\n        mean_loss += loss.item()\n")

MUTANTS = [
    Mutant(cell="day12_accumulate_gradients", find=_LOOP,
           replace="    x = torch.cat([x for x, _ in micro_batches])\n    y = torch.cat([y for _, y in micro_batches])\n"
                   "    loss = loss_fn(model(x), y)\n    loss.backward()\n    mean_loss = loss.item()\n",
           why="concatenated the micro-batches into one big forward pass (right gradient, no memory saved)",
           caught_by="day12_accumulate_gradients_tests"),
    Mutant(cell="day12_accumulate_gradients", find=_LOOP,
           replace="    losses = [loss_fn(model(x), y) * (y.shape[0] / total) for x, y in micro_batches]\n"
                   "    loss = sum(losses)\n    loss.backward()\n    mean_loss = loss.item()\n",
           why="summed the micro-batch losses and called backward once: every graph stays alive until then",
           caught_by="day12_accumulate_gradients_tests"),
    Mutant(cell="day12_accumulate_gradients", find="weight = y.shape[0] / total",
           replace="weight = 1 / len(micro_batches)",
           why="divided by the number of micro-batches although they have different sizes",
           caught_by="day12_accumulate_gradients_tests"),
    Mutant(cell="day12_accumulate_gradients", find="    model.zero_grad(set_to_none=True)\n", replace="",
           why="did not clear stale gradients first", caught_by="day12_accumulate_gradients_tests"),
    Mutant(cell="day12_accumulation_plan", find="plan.append((size, i - group_start == size - 1))",
           replace="plan.append((k, i - group_start == size - 1))",
           why="divided the short last group by k", caught_by="day12_accumulation_plan_tests"),
    Mutant(cell="day12_accumulation_plan", find="i - group_start == size - 1", replace="(i + 1) % k == 0",
           why="the classic (i + 1) % k test: the leftover micro-batches never step",
           caught_by="day12_accumulation_plan_tests"),
    Mutant(cell="day12_train_epoch_accumulated", find="        scaler.scale(loss).backward()\n",
           replace="        scaler.scale(loss).backward()\n        if not step_after:\n            scaler.update()\n",
           why="scaler.update() after every micro-batch", caught_by="day12_train_epoch_accumulated_tests"),
    Mutant(cell="day12_train_epoch_accumulated", find="nn.functional.cross_entropy(model(x), y) / divisor",
           replace="nn.functional.cross_entropy(model(x), y) / k",
           why="divided the short last group's losses by k", caught_by="day12_train_epoch_accumulated_tests"),
    Mutant(cell="day12_train_epoch_accumulated", find="            optimizer.zero_grad(set_to_none=True)\n", replace="",
           why="never cleared the gradients after a step: groups leak into each other",
           caught_by="day12_train_epoch_accumulated_tests"),
    Mutant(cell="day12_train_epoch_accumulated", find="            scaler.step(optimizer)\n",
           replace="            optimizer.step()\n",
           why="optimizer.step() instead of scaler.step(optimizer): an overflowing group is applied",
           caught_by="day12_train_epoch_accumulated_tests"),
    Mutant(cell="day12_train_epoch_accumulated", find="            scaler.unscale_(optimizer)\n", replace="",
           why="clipped the scaled gradients", caught_by="day12_train_epoch_accumulated_tests"),
    Mutant(cell="day12_train_epoch_accumulated", find="device_type=x.device.type", replace='device_type="cuda"',
           why="hard-coded autocast's device type", caught_by="day12_train_epoch_accumulated_tests"),
    Mutant(cell="day12_train_epoch_accumulated", find="        if step_after:\n",
           replace="        if step_after and divisor == k:\n",
           why="dropped the leftover micro-batches at the end of the epoch",
           caught_by="day12_train_epoch_accumulated_tests"),
    Mutant(cell="day12_train_epoch_accumulated", find="    model.train()\n", replace="",
           why="left an eval-mode model in eval mode", caught_by="day12_train_epoch_accumulated_tests"),
]
