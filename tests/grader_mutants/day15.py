"""Day 15: plausible wrong answers to the warm-up + cosine formula and to moving a recipe to a new configuration."""
from grader_mutants import Mutant

_SCHEDULE = ("    for group in optimizer.param_groups:                   # before the scheduler reads the rates\n"
             "        group[\"lr\"] *= effective / base_batch\n"
             "    steps_per_epoch = math.ceil(batches_per_epoch / accumulation_steps)\n"
             "    factor = warmup_cosine(warmup_epochs * steps_per_epoch, epochs * steps_per_epoch, floor=floor)\n"
             "    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)")

MUTANTS = [
    Mutant(cell="day15_warmup_cosine_lr",
           find="return base_lr * (step + 1) / warmup_steps",
           replace="return base_lr * (1 / warmup_steps + (1 - 1 / warmup_steps) * step / warmup_steps)",
           why="LinearLR's total_iters=warmup: the ramp reaches the peak one step late",
           caught_by="day15_warmup_cosine_lr_tests"),
    Mutant(cell="day15_warmup_cosine_lr",
           find="progress = (step - warmup_steps) / (total_steps - warmup_steps)", replace="progress = step / total_steps",
           why="the cosine's counter starts at step 0 instead of at the end of the warm-up",
           caught_by="day15_warmup_cosine_lr_tests"),
    Mutant(cell="day15_warmup_cosine_lr",
           find="eta_min + (base_lr - eta_min) * 0.5", replace="eta_min + base_lr * 0.5",
           why="adds eta_min on top of the cosine instead of decaying to it",
           caught_by="day15_warmup_cosine_lr_tests"),
    Mutant(cell="day15_warmup_cosine_lr",
           find="    if step >= total_steps:\n        return float(eta_min)\n", replace="",
           why="no guard after total_steps: the cosine restarts, like CosineAnnealingLR stepped past T_max",
           caught_by="day15_warmup_cosine_lr_tests"),
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
]
