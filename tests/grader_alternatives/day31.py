"""Day 31 · Compression: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    Alternative(
        cell="day31_quantize_int8",
        why="torch.aminmax for both ends, the range's ends clamped to include 0 on the device and read back "
            "together with one tolist() of two values, zero point as quant_min - round(lo / scale) (the observer's "
            "form), method chaining for q",
        source='''def dequantize(q: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:
    return (q.to(torch.float32) - zero_point) * scale


def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, float, int]:
    lo_t, hi_t = torch.aminmax(x)
    lo, hi = torch.stack([lo_t.clamp(max=0), hi_t.clamp(min=0)]).tolist()   # one read of two numbers
    scale = (hi - lo) / 255 if hi != lo else 1.0
    zero_point = min(127, max(-128, -128 - round(lo / scale)))
    q = (x / scale).round().add(zero_point).clamp(-128, 127).to(torch.int8)
    return q, float(scale), int(zero_point)
'''),
    Alternative(
        cell="day31_quantize_int8",
        why="a learner who distrusts float32: the range read with .item(), scale and zero point worked out in "
            "float64 with NumPy's round, the integers computed from a float64 copy of x (on its device)",
        source='''def dequantize(q: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:
    return (q.to(torch.float32) - zero_point) * scale


def quantize_int8(x: torch.Tensor) -> tuple[torch.Tensor, float, int]:
    lo = min(x.min().item(), 0.0)
    hi = max(x.max().item(), 0.0)
    if hi == lo:
        scale = 1.0
    else:
        scale = float(np.float64(hi - lo) / 255.0)
    zero_point = int(np.clip(np.round(-128.0 - lo / scale), -128, 127))
    q = torch.clamp(torch.round(x.double() / scale) + zero_point, min=-128, max=127).to(torch.int8)
    return q, scale, zero_point
'''),
    Alternative(
        cell="day31_distillation_loss",
        why="the teacher's log-probabilities as the target (F.kl_div with log_target=True), T squared written as "
            "T ** 2, the cross-entropy term weighted first",
        source='''def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor,
                      T: float = 4.0, alpha: float = 0.7) -> torch.Tensor:
    hard = F.cross_entropy(student_logits, targets)
    log_p_student = F.log_softmax(student_logits / T, dim=-1)
    log_p_teacher = F.log_softmax(teacher_logits.detach() / T, dim=-1)
    soft = F.kl_div(log_p_student, log_p_teacher, reduction="batchmean", log_target=True)
    return (1 - alpha) * hard + alpha * T ** 2 * soft
'''),
    Alternative(
        cell="day31_distillation_loss",
        why="written out by hand: KL as the sum over classes of p_t (log p_t - log p_s), averaged over the batch "
            "with .mean(), the teacher detached once at the top",
        source='''def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor,
                      T: float = 4.0, alpha: float = 0.7) -> torch.Tensor:
    teacher_logits = teacher_logits.detach()
    p_teacher = torch.softmax(teacher_logits / T, dim=1)
    kl = (p_teacher * (torch.log_softmax(teacher_logits / T, dim=1)
                       - torch.log_softmax(student_logits / T, dim=1))).sum(dim=1).mean()
    return alpha * (T * T) * kl + (1.0 - alpha) * F.cross_entropy(student_logits, targets)
'''),
    Alternative(
        cell="day31_distillation_step",
        why="the teacher under torch.inference_mode() and put back in the mode it was in, gradients cleared "
            "through the student, the loss returned with float()",
        source='''def distillation_step(student: torch.nn.Module, teacher: torch.nn.Module, images: torch.Tensor,
                      targets: torch.Tensor, optimizer: torch.optim.Optimizer, T: float = 4.0,
                      alpha: float = 0.7) -> float:
    was_training = teacher.training
    teacher.eval()
    with torch.inference_mode():
        soft_targets = teacher(images)
    teacher.train(was_training)
    student.zero_grad(set_to_none=True)
    loss = distillation_loss(student(images), soft_targets, targets, T, alpha)
    loss.backward()
    optimizer.step()
    return float(loss)
'''),
    Alternative(
        cell="day31_distillation_step",
        why="clears the gradients first with optimizer.zero_grad(), the teacher in eval mode through train(False) "
            "under no_grad, keyword arguments, .detach().item()",
        source='''def distillation_step(student: torch.nn.Module, teacher: torch.nn.Module, images: torch.Tensor,
                      targets: torch.Tensor, optimizer: torch.optim.Optimizer, T: float = 4.0,
                      alpha: float = 0.7) -> float:
    optimizer.zero_grad()
    teacher.train(False)
    with torch.no_grad():
        t_logits = teacher(images)
    s_logits = student(images)
    loss = distillation_loss(student_logits=s_logits, teacher_logits=t_logits, targets=targets, T=T, alpha=alpha)
    loss.backward()
    optimizer.step()
    return loss.detach().item()
'''),
    Alternative(
        cell="day31_distillation_loss",
        why="both logits upcast with .float() before the softmax (the guard under fp16 autocast), the teacher's "
            "log-probabilities as the target, T ** 2",
        source='''def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor,
                      T: float = 4.0, alpha: float = 0.7) -> torch.Tensor:
    student = student_logits.float()                 # the softmax in fp32 even when the logits come from fp16/bf16
    teacher = teacher_logits.detach().float()
    soft = F.kl_div(F.log_softmax(student / T, dim=1), F.log_softmax(teacher / T, dim=1), reduction="batchmean",
                    log_target=True)
    return alpha * T ** 2 * soft + (1 - alpha) * F.cross_entropy(student, targets)
'''),
]
