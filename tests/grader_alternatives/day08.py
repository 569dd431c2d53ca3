"""Day 08 · Where memory goes: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # ------------------------------------------------------------------ Exercise 1 · state_bytes_by_key
    Alternative(
        cell="day08_state_bytes_by_key",
        why="reads the state through optimizer.state_dict() (the same tensors, keyed by index; it adds no entry) "
            "and sums with a defaultdict and Tensor.nbytes",
        source='''from collections import defaultdict

def state_bytes_by_key(optimizer: torch.optim.Optimizer) -> dict[str, int]:
    totals = defaultdict(int)
    for per_param in optimizer.state_dict()["state"].values():
        for key, value in per_param.items():
            if torch.is_tensor(value):
                totals[key] += value.nbytes
    return dict(totals)
'''),
    Alternative(
        cell="day08_state_bytes_by_key",
        why="a Counter over (key, bytes) pairs, walking the parameters that have state with .items()",
        source='''from collections import Counter

def state_bytes_by_key(optimizer: torch.optim.Optimizer) -> dict[str, int]:
    sizes = Counter()
    for _param, state in optimizer.state.items():
        sizes.update({k: v.element_size() * v.numel() for k, v in state.items() if isinstance(v, torch.Tensor)})
    return {k: int(v) for k, v in sizes.items()}
'''),
    # ------------------------------------------------------------------ Exercise 2 · unique_bytes
    Alternative(
        cell="day08_unique_bytes",
        why="a set of (pointer, size) pairs and a comprehension",
        source='''def unique_bytes(tensors: list, exclude: list = ()) -> int:
    excluded = {t.untyped_storage().data_ptr() for t in exclude}
    storages = {(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) for t in tensors}
    by_pointer = {}
    for ptr, nbytes in storages:
        if ptr not in excluded:
            by_pointer[ptr] = max(nbytes, by_pointer.get(ptr, 0))
    return sum(by_pointer.values())
'''),
    Alternative(
        cell="day08_unique_bytes",
        why="the course's helper utils.memory.unique_storage_bytes, after filtering out the excluded storages",
        source='''from utils.memory import unique_storage_bytes

def unique_bytes(tensors: list, exclude: list = ()) -> int:
    skip = {e.untyped_storage().data_ptr() for e in exclude}
    return unique_storage_bytes(t for t in tensors if t.untyped_storage().data_ptr() not in skip)
'''),
    # ------------------------------------------------------------------ Exercise 3 · saved_bytes_by_module
    Alternative(
        cell="day08_saved_bytes_by_module",
        why="one variable for the running leaf module (leaves do not nest), hooks removed in a finally block, and "
            "the storages attributed after the forward from a log of (module, pointer, bytes)",
        source='''def saved_bytes_by_module(model: nn.Module, x: torch.Tensor) -> dict[str, int]:
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    current = {"name": ""}
    log = []

    def pack(t):
        s = t.untyped_storage()
        log.append((current["name"], s.data_ptr(), s.nbytes()))
        return t.detach()

    handles = []
    for name, m in model.named_modules():
        if len(list(m.children())) == 0:
            handles.append(m.register_forward_pre_hook(lambda mod, args, name=name: current.update(name=name)))
            handles.append(m.register_forward_hook(lambda mod, args, out: current.update(name="")))
    mode = model.training
    try:
        model.train()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            _ = model(x)
    finally:
        for h in handles:
            h.remove()
        model.train(mode)
    result, first = {}, set()
    for name, ptr, nbytes in log:
        if ptr in params or ptr in first:
            continue
        first.add(ptr)
        result[name] = result.get(name, 0) + nbytes
    return result
'''),
    Alternative(
        cell="day08_saved_bytes_by_module",
        why="names the running module through a dict from module to name and a stack of modules, and restores "
            "every submodule's own mode",
        source='''def saved_bytes_by_module(model: nn.Module, x: torch.Tensor) -> dict[str, int]:
    names = {m: n for n, m in model.named_modules()}
    leaves = [m for m in model.modules() if not any(True for _ in m.children())]
    stack = []
    excluded = {p.untyped_storage().data_ptr() for p in model.parameters()}
    counted = set()
    out = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in excluded and st.data_ptr() not in counted:
            counted.add(st.data_ptr())
            who = names[stack[-1]] if stack else ""
            out[who] = out.get(who, 0) + st.nbytes()
        return t.detach()

    def leave(mod, args, output):
        stack.pop()                      # returns None: the module's output stays as it is

    handles = [m.register_forward_pre_hook(lambda mod, a: stack.append(mod)) for m in leaves]
    handles += [m.register_forward_hook(leave) for m in leaves]
    modes = {m: m.training for m in model.modules()}
    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    for h in handles:
        h.remove()
    for m, flag in modes.items():
        m.training = flag
    return out
'''),
]
