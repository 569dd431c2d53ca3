"""Day 20: the ZeRO calculator, the gradient reduce-scatter and the sharded optimizer, written other ways."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # Exercise 1: zero_bytes_per_rank.
    Alternative(cell="day20_zero_bytes_per_rank", why="a table of which parts each stage shards; integer ceiling "
                "by (n + w - 1) // w", source='''SHARDED = {0: (False, False, False), 1: (False, False, True), 2: (False, True, True), 3: (True, True, True)}

def zero_bytes_per_rank(num_params: int, world_size: int, stage: int, bytes_param: int = 4, bytes_grad: int = 4,
                        bytes_optim: int = 8) -> dict[str, int]:
    if stage not in SHARDED:
        raise ValueError(f"no ZeRO stage {stage}")
    if world_size < 1:
        raise ValueError("world_size must be at least 1")
    per_rank = (num_params + world_size - 1) // world_size
    out = {}
    for part, nbytes, sharded in zip(("parameters", "gradients", "optimizer"), (bytes_param, bytes_grad, bytes_optim),
                                     SHARDED[stage]):
        out[part] = (per_rank if sharded else num_params) * nbytes
    out["total"] = sum(out.values())
    return out
'''),
    Alternative(cell="day20_zero_bytes_per_rank", why="stage compared with thresholds, math.ceil on an exact "
                "fraction", source='''from fractions import Fraction

def zero_bytes_per_rank(num_params: int, world_size: int, stage: int, bytes_param: int = 4, bytes_grad: int = 4,
                        bytes_optim: int = 8) -> dict[str, int]:
    if not isinstance(stage, int) or stage < 0 or stage > 3 or world_size < 1:
        raise ValueError(f"stage {stage}, world_size {world_size}: need a stage in 0..3 and at least one rank")
    shard = math.ceil(Fraction(num_params, world_size))
    params = bytes_param * (shard if stage == 3 else num_params)
    grads = bytes_grad * (shard if stage >= 2 else num_params)
    optim = bytes_optim * (num_params if stage == 0 else shard)
    return dict(parameters=int(params), gradients=int(grads), optimizer=int(optim), total=int(params + grads + optim))
'''),
    # Exercise 2: reduce_scatter_gradients.
    Alternative(cell="day20_reduce_scatter_gradients", why="dist.reduce_scatter_tensor on the flat buffer, padding "
                "by torch.cat with zeros", source='''def reduce_scatter_gradients(params: list[nn.Parameter]) -> torch.Tensor:
    W = dist.get_world_size()
    grads = torch.cat([p.grad.flatten() for p in params])
    S = math.ceil(grads.numel() / W)
    padded = torch.cat([grads, grads.new_zeros(W * S - grads.numel())])
    mine = grads.new_empty(S)
    dist.reduce_scatter_tensor(mine, padded)
    return mine / W
'''),
    Alternative(cell="day20_reduce_scatter_gradients", why="rows of a (W, S) view as the input list, divided in place",
                source='''def reduce_scatter_gradients(params: list[nn.Parameter]) -> torch.Tensor:
    world = dist.get_world_size()
    numel = sum(p.numel() for p in params)
    size = -(-numel // world)
    buffer = torch.zeros(world * size, dtype=params[0].grad.dtype)
    offset = 0
    for p in params:
        buffer[offset:offset + p.numel()] = p.grad.reshape(-1)
        offset += p.numel()
    out = torch.zeros(size, dtype=buffer.dtype)
    dist.reduce_scatter(out, list(buffer.view(world, size).unbind(0)), op=dist.ReduceOp.SUM)
    return out.div_(world)
'''),
    # Exercise 3: make_shard and sharded_step.
    Alternative(cell="day20_sharded_optimizer", why="parameters_to_vector and narrow().clone(); "
                "all_gather_into_tensor; the parameters copied back one by one", source='''def make_shard(params: list[nn.Parameter], lr: float) -> tuple[torch.Tensor, torch.optim.Optimizer]:
    W, r = dist.get_world_size(), dist.get_rank()
    flat = torch.nn.utils.parameters_to_vector(params).detach()
    S = math.ceil(flat.numel() / W)
    flat = torch.cat([flat, flat.new_zeros(W * S - flat.numel())])
    shard = flat.narrow(0, r * S, S).clone()
    return shard, torch.optim.Adam([shard], lr=lr)

def sharded_step(params: list[nn.Parameter], master_shard: torch.Tensor, optimizer: torch.optim.Optimizer,
                 grad_shard: torch.Tensor) -> None:
    W = dist.get_world_size()
    master_shard.grad = grad_shard.clone()
    optimizer.step()
    full = master_shard.new_empty(W * master_shard.numel())
    dist.all_gather_into_tensor(full, master_shard.detach())
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(full[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
'''),
    Alternative(cell="day20_sharded_optimizer", why="shard cut with shard_range, all_gather into a list then "
                "torch.cat", source='''def make_shard(params: list[nn.Parameter], lr: float) -> tuple[torch.Tensor, torch.optim.Optimizer]:
    world, rank = dist.get_world_size(), dist.get_rank()
    flat = torch.cat([p.detach().flatten() for p in params])
    size = -(-flat.numel() // world)
    start, stop = shard_range(flat.numel(), rank, world)
    master = torch.zeros(size, dtype=torch.float32)
    master[:stop - start] = flat[start:stop]
    return master, torch.optim.Adam([master], lr=lr)

def sharded_step(params: list[nn.Parameter], master_shard: torch.Tensor, optimizer: torch.optim.Optimizer,
                 grad_shard: torch.Tensor) -> None:
    master_shard.grad = grad_shard
    optimizer.step()
    parts = [torch.empty_like(master_shard) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, master_shard.detach())
    everything = torch.cat(parts)[:sum(p.numel() for p in params)]
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(everything, params)
'''),
]
