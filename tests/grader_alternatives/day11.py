"""Day 11 · Mixed precision: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    Alternative(cell="day11_amp_train_step",
                why="returns float(loss), which warns on stderr because the loss requires grad",
                find="return loss.item(), float(grad_norm)", replace="return float(loss), float(grad_norm)"),
    # Exercise 1 · ManualScaler
    Alternative(cell="day11_manual_scaler",
                why="multiplies by 1/S (exact for the powers of two a scaler uses), collects the gradients first and "
                    "checks them with any(); counts good steps with >=",
                source='''class ManualScaler:
    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000):
        self.S = float(init_scale)
        self.growth_factor = growth_factor
        self.backoff_factor = backoff_factor
        self.growth_interval = growth_interval
        self.tracker = 0
        self.last_ok = True

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return self.S * loss

    def step(self, optimizer: torch.optim.Optimizer) -> bool:
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        inv = 1.0 / self.S
        for grad in grads:
            grad.mul_(inv)
        self.last_ok = not any(bool((~torch.isfinite(grad)).any()) for grad in grads)
        if self.last_ok:
            optimizer.step()
        return self.last_ok

    def update(self) -> None:
        if not self.last_ok:
            self.S = self.S * self.backoff_factor
            self.tracker = 0
            return
        self.tracker += 1
        if self.tracker >= self.growth_interval:
            self.S = self.S * self.growth_factor
            self.tracker = 0

    def get_scale(self) -> float:
        return self.S
'''),
    Alternative(cell="day11_manual_scaler",
                why="stops unscaling at the first non-finite gradient (the step is skipped anyway) and detects it "
                    "with isnan/isinf on the gradient's sum",
                source='''class ManualScaler:
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        self.current = float(init_scale)
        self.up, self.down, self.every = growth_factor, backoff_factor, growth_interval
        self.good = 0
        self.skipped = False

    def scale(self, loss):
        return loss * self.current

    def step(self, optimizer):
        self.skipped = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.grad /= self.current
                total = p.grad.sum()
                if torch.isnan(total) or torch.isinf(total):
                    self.skipped = True
                    return False
        optimizer.step()
        return True

    def update(self):
        if self.skipped:
            self.current *= self.down
            self.good = 0
        else:
            self.good += 1
            if self.good % self.every == 0:
                self.current *= self.up
                self.good = 0

    def get_scale(self):
        return float(self.current)
'''),
    # Exercise 2 · amp_train_step
    Alternative(cell="day11_amp_train_step",
                why="no unscale_: clips the scaled gradients at max_norm x S and divides the returned norm by S "
                    "(the same clip; an inf norm turns the gradients into NaN, which scaler.step skips)",
                source='''def amp_train_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, optimizer: torch.optim.Optimizer,
                   scaler: torch.amp.GradScaler, amp_dtype: torch.dtype, max_norm: float) -> tuple[float, float]:
    model.train()
    optimizer.zero_grad()
    with torch.autocast(x.device.type, dtype=amp_dtype):
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
    scaler.scale(loss).backward()
    s = scaler.get_scale() if scaler.is_enabled() else 1.0
    scaled_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm * s)
    scaler.step(optimizer)
    scaler.update()
    return float(loss.detach()), float(scaled_norm) / s
'''),
    Alternative(cell="day11_amp_train_step",
                why="get_total_norm + clip_grads_with_norm_ after unscale_, model.zero_grad, the loss read through "
                    "detach().float()",
                source='''def amp_train_step(model, x, y, optimizer, scaler, amp_dtype, max_norm):
    model.train(True)
    model.zero_grad(set_to_none=True)
    with torch.autocast(device_type=x.device.type, dtype=amp_dtype):
        loss = nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    params = [p for p in model.parameters() if p.grad is not None]
    total = torch.nn.utils.get_total_norm([p.grad for p in params])
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach().float().item(), total.item()
'''),
    Alternative(cell="day11_amp_train_step",
                why="the loss module nn.CrossEntropyLoss, imported by name, inside the block (the loss's "
                    "nll_loss is watched below autocast, whatever spelling reaches it)",
                find="        loss = nn.functional.cross_entropy(model(x), y)\n",
                replace="        from torch.nn import CrossEntropyLoss\n        loss = CrossEntropyLoss()(model(x), y)\n"),
    Alternative(cell="day11_amp_train_step",
                why="the forward under autocast, the loss after it on logits cast to fp32 (what autocast's fp32 "
                    "list does for cross_entropy)",
                find="        loss = nn.functional.cross_entropy(model(x), y)\n    scaler.scale(loss).backward()\n",
                replace="        logits = model(x)\n    loss = nn.functional.cross_entropy(logits.float(), y)\n"
                        "    scaler.scale(loss).backward()\n"),
    Alternative(cell="day11_amp_train_step",
                why="nll_loss of log_softmax inside the block: the same cross-entropy (log_softmax alone runs in bf16 "
                    "on the CPU, nll_loss in fp32)",
                find="        loss = nn.functional.cross_entropy(model(x), y)\n",
                replace="        loss = nn.functional.nll_loss(nn.functional.log_softmax(model(x), dim=1), y)\n"),
    Alternative(cell='day11_amp_train_step',
                why="saves model.training, trains in training mode and puts the caller's mode back afterwards; the text asks that 'the model trains in training mode', not that it stays there, but the hidden test asserts _m.training after the call",
                find='    model.train()\n    optimizer.zero_grad(set_to_none=True)\n    with torch.autocast(device_type=x.device.type, dtype=amp_dtype):\n        loss = nn.functional.cross_entropy(model(x), y)\n    scaler.scale(loss).backward()\n    scaler.unscale_(optimizer)\n    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n    scaler.step(optimizer)\n    scaler.update()\n    return loss.item(), float(grad_norm)\n', replace='    was_training = model.training\n    model.train()\n    optimizer.zero_grad(set_to_none=True)\n    with torch.autocast(device_type=x.device.type, dtype=amp_dtype):\n        loss = nn.functional.cross_entropy(model(x), y)\n    scaler.scale(loss).backward()\n    scaler.unscale_(optimizer)\n    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n    scaler.step(optimizer)\n    scaler.update()\n    model.train(was_training)\n    return loss.item(), float(grad_norm)\n'),
]
