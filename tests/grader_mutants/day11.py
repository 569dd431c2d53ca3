"""Day 11 · Mixed precision: plausible wrong answers the hidden tests must catch."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day11_amp_train_step", find="    scaler.step(optimizer)\n",
           replace="    if torch.isfinite(grad_norm):\n        optimizer.step()\n",
           why="steps the optimizer itself behind a finiteness check instead of through scaler.step",
           caught_by="day11_amp_train_step_tests"),
    Mutant(cell="day11_manual_scaler", find="        if self._found_inf:\n            return False\n", replace="",
           why="stepped the optimizer even when a gradient overflowed", caught_by="day11_manual_scaler_tests"),
    Mutant(cell="day11_manual_scaler", find="p.grad.div_(self._scale)", replace="pass",
           why="never unscaled: the optimizer sees gradients S times too large", caught_by="day11_manual_scaler_tests"),
    Mutant(cell="day11_manual_scaler", find="if self._good_steps == self.growth_interval:",
           replace="if self._good_steps > self.growth_interval:",
           why="grew the scale one good step too late", caught_by="day11_manual_scaler_tests"),
    Mutant(cell="day11_manual_scaler", find="            self._scale *= self.backoff_factor\n            self._good_steps = 0\n",
           replace="            self._scale *= self.backoff_factor\n",
           why="an overflow did not restart the count of good steps", caught_by="day11_manual_scaler_tests"),
    Mutant(cell="day11_manual_scaler", find="if not torch.isfinite(p.grad).all():",
           replace="if torch.isinf(p.grad).any():",
           why="checked for inf but not NaN", caught_by="day11_manual_scaler_tests"),
    Mutant(cell="day11_amp_train_step", find="    scaler.step(optimizer)\n", replace="    optimizer.step()\n",
           why="optimizer.step() instead of scaler.step(optimizer): an overflowing step is not skipped",
           caught_by="day11_amp_train_step_tests"),
    Mutant(cell="day11_amp_train_step", find="    scaler.unscale_(optimizer)\n", replace="",
           why="clipped (and reported the norm of) the scaled gradients", caught_by="day11_amp_train_step_tests"),
    Mutant(cell="day11_amp_train_step", find="device_type=x.device.type", replace='device_type="cuda"',
           why="hard-coded autocast's device type to cuda (no autocast at all on a CPU batch)",
           caught_by="day11_amp_train_step_tests"),
    Mutant(cell="day11_amp_train_step", find="    scaler.update()\n", replace="",
           why="never updated the scale", caught_by="day11_amp_train_step_tests"),
    Mutant(cell="day11_amp_train_step", find="    optimizer.zero_grad(set_to_none=True)\n", replace="",
           why="did not clear the previous step's gradients", caught_by="day11_amp_train_step_tests"),
    Mutant(cell="day11_amp_train_step", find="    model.train()\n", replace="",
           why="left an eval-mode model in eval mode for a training step", caught_by="day11_amp_train_step_tests"),
    Mutant(cell="day11_amp_train_step", find="    return loss.item(), float(grad_norm)\n",
           replace="    return (loss * scaler.get_scale()).item(), float(grad_norm)\n",
           why="returned the scaled loss", caught_by="day11_amp_train_step_tests"),
    Mutant(cell="day11_amp_train_step",
           find="    scaler.unscale_(optimizer)\n    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n",
           replace="    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n    scaler.unscale_(optimizer)\n",
           why="unscaled after clipping: the clip compared the scaled gradients with the true threshold",
           caught_by="day11_amp_train_step_tests"),
    Mutant(cell="day11_amp_train_step",
           find="        loss = nn.functional.cross_entropy(model(x), y)\n    scaler.scale(loss).backward()\n"
                "    scaler.unscale_(optimizer)\n    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"
                "    scaler.step(optimizer)\n    scaler.update()\n",
           replace="        loss = nn.functional.cross_entropy(model(x), y)\n        scaler.scale(loss).backward()\n"
                   "        scaler.unscale_(optimizer)\n"
                   "        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"
                   "        scaler.step(optimizer)\n        scaler.update()\n",
           why="the backward pass, clipping and the step run inside the autocast block",
           caught_by="day11_amp_train_step_tests"),
    Mutant(cell="day11_amp_train_step",
           find="    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n",
           replace="    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"
                   "    grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])\n",
           why="returns the norm of the clipped gradients (max_norm whenever the clip is active), not the norm before "
               "clipping",
           caught_by="day11_amp_train_step_tests"),
]
