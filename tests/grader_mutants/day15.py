"""Day 15: plausible wrong answers to the LR range test and to moving a recipe to a new configuration."""
from grader_mutants import Mutant

_SCHEDULE = ("    for group in optimizer.param_groups:                   # before the scheduler reads the rates\n"
             "        group[\"lr\"] *= effective / base_batch\n"
             "        if \"initial_lr\" in group:                          # set by an earlier scheduler: LambdaLR reads this one\n"
             "            group[\"initial_lr\"] *= effective / base_batch\n"
             "    steps_per_epoch = math.ceil(batches_per_epoch / accumulation_steps)\n"
             "    factor = warmup_cosine(warmup_epochs * steps_per_epoch, epochs * steps_per_epoch, floor=floor)\n"
             "    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)")

_SET_LR_AND_STEP = ("        for group in optimizer.param_groups:                 # every group, before the step that uses it\n"
                    "            group[\"lr\"] = lr\n"
                    "        loss = loss_fn(model(x.to(model_device)), y.to(model_device))\n"
                    "        value = loss.item()\n"
                    "        if not math.isfinite(value):\n"
                    "            break\n"
                    "        optimizer.zero_grad(set_to_none=True)\n"
                    "        loss.backward()\n"
                    "        optimizer.step()\n")
_CYCLE = ("    batches = iter(loader)\n"
          "    for i in range(steps):\n"
          "        try:\n"
          "            x, y = next(batches)\n"
          "        except StopIteration:                                # a short loader: start it again\n"
          "            batches = iter(loader)\n"
          "            x, y = next(batches)\n")

MUTANTS = [
    Mutant(cell="day15_lr_range_test",
           find=_SET_LR_AND_STEP,
           replace=("        loss = loss_fn(model(x.to(model_device)), y.to(model_device))\n"
                    "        value = loss.item()\n"
                    "        if not math.isfinite(value):\n"
                    "            break\n"
                    "        optimizer.zero_grad(set_to_none=True)\n"
                    "        loss.backward()\n"
                    "        optimizer.step()\n"
                    "        for group in optimizer.param_groups:\n"
                    "            group[\"lr\"] = lr\n"),
           why="sets the learning rate after optimizer.step(): every step trains at the previous step's rate",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="lr = start_lr * growth**i", replace="lr = start_lr + (end_lr - start_lr) * i / max(steps - 1, 1)",
           why="sweeps the learning rate linearly: nearly every step is already at a rate that is too high",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="for group in optimizer.param_groups:                 # every group",
           replace="for group in optimizer.param_groups[:1]:             # every group",
           why="sets the rate of the first parameter group only",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="smoothed.append(avg / (1 - beta ** (i + 1)))", replace="smoothed.append(value)",
           why="no smoothing: records the raw batch loss",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="smoothed.append(avg / (1 - beta ** (i + 1)))", replace="smoothed.append(avg)",
           why="smooths without the bias correction: the first points are pulled towards 0",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="        if smoothed[-1] > diverge * best:\n            break\n", replace="",
           why="never stops at divergence: sweeps on to end_lr through the explosion",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="best = min(best, smoothed[-1])\n        if smoothed[-1] > diverge * best:",
           replace="best = min(best, value)\n        if value > diverge * best:",
           why="stops on the raw batch loss: one noisy batch ends the test",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="        if not math.isfinite(value):\n            break\n", replace="",
           why="does not stop at a nan loss: records it and trains on nan weights",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="        optimizer.zero_grad(set_to_none=True)\n", replace="",
           why="never zeroes the gradients: every step adds the gradients of all the previous batches",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find=_CYCLE, replace="    for i, (x, y) in zip(range(steps), loader):\n",
           why="iterates the loader once: a loader shorter than the test ends it early",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="    model.load_state_dict(model_state)\n", replace="",
           why="does not restore the model: training continues from the wrecked weights",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="    optimizer.load_state_dict(optimizer_state)\n", replace="",
           why="does not restore the optimizer: it keeps end-of-test learning rates and momentum buffers",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="model_state = copy.deepcopy(model.state_dict())", replace="model_state = model.state_dict()",
           why="saves model.state_dict() without a copy: it holds the live tensors, so the 'restore' is a no-op",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="optimizer_state = copy.deepcopy(optimizer.state_dict())",
           replace="optimizer_state = optimizer.state_dict()",
           why="saves optimizer.state_dict() without a copy: the rates come back, the momentum buffers do not",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="suggested = lrs[smoothed.index(min(smoothed))] / 10", replace="suggested = lrs[smoothed.index(min(smoothed))]",
           why="suggests the rate at the minimum itself, already at the edge of instability",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find=" if smoothed else math.nan   # nothing recorded: no suggestion", replace="",
           why="a nan first loss leaves nothing recorded, and min() of the empty list raises instead of returning nan",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_scale_and_schedule",
           find="effective = per_device_batch * accumulation_steps * world_size", replace="effective = per_device_batch",
           why="scales with the per-device batch, not the effective batch (accumulation and processes forgotten)",
           caught_by="day15_scale_and_schedule_tests"),
    Mutant(cell="day15_scale_and_schedule",
           find=_SCHEDULE,
           replace=("    steps_per_epoch = math.ceil(batches_per_epoch / accumulation_steps)\n"
                    "    factor = warmup_cosine(warmup_epochs * steps_per_epoch, epochs * steps_per_epoch, floor=floor)\n"
                    "    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)\n"
                    "    for group in optimizer.param_groups:\n"
                    "        group[\"lr\"] *= effective / base_batch\n"
                    "    return scheduler"),
           why="scales the rates after creating the LambdaLR: it read the old ones, and its first step undoes the scaling",
           caught_by="day15_scale_and_schedule_tests"),
    Mutant(cell="day15_scale_and_schedule",
           find="steps_per_epoch = math.ceil(batches_per_epoch / accumulation_steps)",
           replace="steps_per_epoch = batches_per_epoch",
           why="counts the schedule in micro-batches: with accumulation it runs K times too slowly",
           caught_by="day15_scale_and_schedule_tests"),
    Mutant(cell="day15_scale_and_schedule",
           find="steps_per_epoch = math.ceil(batches_per_epoch / accumulation_steps)",
           replace="steps_per_epoch = batches_per_epoch // accumulation_steps",
           why="forgets the optimizer step of the last, partial accumulation window",
           caught_by="day15_scale_and_schedule_tests"),
    Mutant(cell="day15_scale_and_schedule",
           find="    for group in optimizer.param_groups:                   # before the scheduler reads the rates\n",
           replace="    for group in optimizer.param_groups[:1]:\n",
           why="scales only the first parameter group",
           caught_by="day15_scale_and_schedule_tests"),
    Mutant(cell="day15_lr_range_test", find="    model.train(was_training)\n", replace="",
           why="restores the weights and the optimizer but not the mode: a model that came in eval mode leaves in training mode",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test", find="    model.train()\n", replace="",
           why="never switches to training mode: an eval-mode model runs the sweep with frozen BatchNorm statistics",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell="day15_lr_range_test",
           find="loss = loss_fn(model(x.to(model_device)), y.to(model_device))", replace="loss = loss_fn(model(x), y)",
           why="never moves the batches to the model's device: invisible on a CPU, a crash on the first GPU",
           caught_by="day15_lr_range_test_tests"),
    Mutant(cell='day15_scale_and_schedule',
           find='group["lr"] *= effective / base_batch\n        if',
           replace='group["lr"] *= effective // base_batch\n        if',
           why='integer division effective // base_batch: a 192-image effective batch against 256 gives a learning rate of 0',
           caught_by='day15_scale_and_schedule_tests'),
    Mutant(cell='day15_lr_range_test',
           find='if not math.isfinite(value):',
           replace='if math.isnan(value):',
           why="checked math.isnan instead of 'not finite': an inf loss is recorded as if it were a number",
           caught_by='day15_lr_range_test_tests'),
    Mutant(cell='day15_lr_range_test',
           find='        try:\n            x, y = next(batches)\n        except StopIteration:                                # a short loader: start it again\n            batches = iter(loader)\n            x, y = next(batches)\n',
           replace='        x, y = next(iter(loader))\n',
           why='next(iter(loader)) starts the loader again at every step: it always trains on the first batch (or, shuffled, restarts the sampler and the workers every step) instead of taking the next batch',
           caught_by='day15_lr_range_test_tests'),
    Mutant(cell='day15_lr_range_test',
           find='    model.train(was_training)\n',
           replace='    model.training = was_training\n',
           why='model.training = was_training sets only the root flag: a model that came in eval mode leaves with its BatchNorm and Dropout in training mode (model.train() at the start switched them all)',
           caught_by='day15_lr_range_test_tests'),
    Mutant(cell='day15_lr_range_test',
           find='loss = loss_fn(model(x.to(model_device)), y.to(model_device))',
           replace='loss = loss_fn(model(x.to(device)), y.to(device))',
           why="x.to(device) with the notebook's global device, not the model's: on a CPU grader both are cpu so the recording_moves check passes; a model on another device (cuda:1, or a GPU model in a CPU-default notebook) gets batches on the wrong device",
           caught_by='day15_lr_range_test_tests'),
]
