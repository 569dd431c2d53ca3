"""Day 17: correct answers to sharding, bucketed gradient averaging and the ring all-reduce, written as other learners
would."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    Alternative(cell="day17_shard_indices", why="modular arithmetic: position i of the padded list is i % n, so rank r gets (r + k W) % n", source='''import math

def shard_indices(n: int, rank: int, world_size: int) -> list[int]:
    per_rank = math.ceil(n / world_size)
    return [(rank + k * world_size) % n for k in range(per_rank)]
'''),
    Alternative(cell="day17_shard_indices", why="itertools: an endless cycle of range(n) cut to the padded length, then a strided slice", source='''import itertools
import math

def shard_indices(n: int, rank: int, world_size: int) -> list[int]:
    padded = list(itertools.islice(itertools.cycle(range(n)), math.ceil(n / world_size) * world_size))
    return padded[rank::world_size]
'''),
    Alternative(
        cell="day17_average_gradients",
        why="torch._utils' flatten/unflatten helpers, buckets cut with an index while loop",
        source='''def average_gradients(model: nn.Module, bucket_cap_bytes: int | None = None) -> None:
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    i = 0
    while i < len(grads):
        j, size = i + 1, grads[i].numel() * grads[i].element_size()
        while j < len(grads):
            extra = grads[j].numel() * grads[j].element_size()
            if bucket_cap_bytes is not None and size + extra > bucket_cap_bytes:
                break
            size += extra
            j += 1
        bucket = grads[i:j]
        flat = torch._utils._flatten_dense_tensors(bucket)
        dist.all_reduce(flat)
        flat /= dist.get_world_size()
        for g, averaged in zip(bucket, torch._utils._unflatten_dense_tensors(flat, bucket)):
            g.copy_(averaged)
        i = j
'''),
    Alternative(
        cell="day17_average_gradients",
        why="DDP's order: buckets filled from the last parameter backwards, each divided before the sum, split back "
            "with torch.split",
        source='''def average_gradients(model: nn.Module, bucket_cap_bytes: int | None = None) -> None:
    world = dist.get_world_size()
    pending = [p.grad for p in model.parameters() if p.grad is not None][::-1]
    cap = math.inf if bucket_cap_bytes is None else bucket_cap_bytes
    buckets = []
    for g in pending:
        nbytes = g.numel() * g.element_size()
        if buckets and buckets[-1][1] + nbytes <= cap:
            buckets[-1][0].append(g)
            buckets[-1][1] += nbytes
        else:
            buckets.append([[g], nbytes])
    for members, _ in buckets:
        flat = torch.cat([g.flatten() for g in members]) / world
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        for g, part in zip(members, torch.split(flat, [g.numel() for g in members])):
            g.copy_(part.view_as(g))
'''),
    Alternative(cell="day17_ring_all_reduce", why="blocking dist.send and dist.recv, even ranks sending first and odd ranks receiving first, so the ring cannot deadlock", source='''def ring_all_reduce(tensor: torch.Tensor) -> None:
    W, r = dist.get_world_size(), dist.get_rank()
    if W == 1:
        return
    parts = tensor.view(-1).tensor_split(W)
    right, left = (r + 1) % W, (r - 1) % W

    def exchange(out, into):
        if r % 2 == 0:
            dist.send(out, right)
            dist.recv(into, left)
        else:
            dist.recv(into, left)
            dist.send(out, right)

    for s in range(W - 1):
        tmp = torch.empty_like(parts[(r - s - 1) % W])
        exchange(parts[(r - s) % W], tmp)
        parts[(r - s - 1) % W].add_(tmp)
    for s in range(W - 1):
        exchange(parts[(r + 1 - s) % W], parts[(r - s) % W])
'''),
    Alternative(cell="day17_ring_all_reduce", why="each step posted with dist.batch_isend_irecv of two P2POps", source='''def ring_all_reduce(tensor: torch.Tensor) -> None:
    W, r = dist.get_world_size(), dist.get_rank()
    if W == 1:
        return None
    chunks = tensor.view(-1).tensor_split(W)
    nxt, prv = (r + 1) % W, (r - 1) % W
    for s in range(W - 1):
        buf = torch.empty_like(chunks[(r - s - 1) % W])
        ops = [dist.P2POp(dist.isend, chunks[(r - s) % W], nxt), dist.P2POp(dist.irecv, buf, prv)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        chunks[(r - s - 1) % W].add_(buf)
    for s in range(W - 1):
        ops = [dist.P2POp(dist.isend, chunks[(r + 1 - s) % W], nxt), dist.P2POp(dist.irecv, chunks[(r - s) % W], prv)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
'''),
    Alternative(cell="day17_ring_all_reduce", why="another schedule: rank r starts the reduce-scatter with chunk r + 1, so it completes chunk r + 2", source='''def ring_all_reduce(tensor: torch.Tensor) -> None:
    world, me = dist.get_world_size(), dist.get_rank()
    if world < 2:
        return None
    flat = tensor.view(-1)
    chunks = flat.tensor_split(world)
    for step in range(world - 1):
        out_i, in_i = (me + 1 - step) % world, (me - step) % world
        incoming = torch.empty_like(chunks[in_i])
        send = dist.isend(chunks[out_i], (me + 1) % world)
        recv = dist.irecv(incoming, (me - 1) % world)
        send.wait(); recv.wait()
        chunks[in_i].add_(incoming)
    for step in range(world - 1):
        out_i, in_i = (me + 2 - step) % world, (me + 1 - step) % world
        send = dist.isend(chunks[out_i], (me + 1) % world)
        recv = dist.irecv(chunks[in_i], (me - 1) % world)
        send.wait(); recv.wait()
'''),
]
