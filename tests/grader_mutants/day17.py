"""Day 17: plausible wrong answers to shard_indices, average_gradients and the hand-written ring all-reduce."""
from grader_mutants import Mutant

_RING_START = "    chunks = tensor.view(-1).tensor_split(world_size)      # views into `tensor`\n"

MUTANTS = [
    Mutant(cell="day17_shard_indices",
           find="    while len(indices) < total:\n        indices += indices[: total - len(indices)]\n", replace="",
           why="no padding: the last ranks get one index fewer and would skip the last all_reduce",
           caught_by="day17_shard_indices_tests"),
    Mutant(cell="day17_shard_indices",
           find="    return indices[rank:total:world_size]",
           replace="    per = total // world_size\n    return indices[rank * per:(rank + 1) * per]",
           why="contiguous blocks instead of DistributedSampler's strided shares",
           caught_by="day17_shard_indices_tests"),
    Mutant(cell="day17_average_gradients",
           find=("    bucket = torch.cat([grad.reshape(-1) for grad in grads])   # one flat buffer: one collective for all\n"
                 "    dist.all_reduce(bucket, op=dist.ReduceOp.SUM)\n"
                 "    bucket.div_(world_size)\n"),
           replace=("    for grad in grads:\n"
                    "        dist.all_reduce(grad, op=dist.ReduceOp.SUM)\n"
                    "        grad.div_(world_size)\n"
                    "    return None\n"
                    "    bucket = None\n"),
           why="one all_reduce per parameter instead of one flat bucket: right values, a collective per tensor",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="    dist.all_reduce(bucket, op=dist.ReduceOp.SUM)\n    bucket.div_(world_size)\n",
           replace=("    parts = [torch.empty_like(bucket) for _ in range(world_size)]\n"
                    "    dist.all_gather(parts, bucket)\n"
                    "    bucket = torch.stack(parts).mean(0)\n"),
           why="averages with all_gather and a mean: right values, but W x the memory and bytes of an all_reduce",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="    dist.all_reduce(bucket, op=dist.ReduceOp.SUM)\n    bucket.div_(world_size)\n",
           replace=("    dist.reduce(bucket, dst=0, op=dist.ReduceOp.SUM)\n"
                    "    bucket.div_(world_size)\n"
                    "    dist.broadcast(bucket, src=0)\n"),
           why="reduce to rank 0 then broadcast: right values, two collectives (and rank 0 a bottleneck)",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="    bucket = torch.cat([grad.reshape(-1) for grad in grads])",
           replace=("    bucket = torch.cat([param.grad.reshape(-1) if param.grad is not None\n"
                    "                        else torch.zeros(param.numel()) for param in model.parameters()])"),
           why="puts zeros for the parameters without a gradient into the bucket: more bytes than the gradients",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="    bucket.div_(world_size)\n", replace="    bucket.div(world_size)\n",
           why="divides a copy (bucket.div instead of div_): the gradients keep the sum",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="bucket.div_(world_size)", replace="bucket.div_(2)",
           why="divides by a hard-coded 2 instead of the process group's world size",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="        grad.copy_(bucket[offset:offset + grad.numel()].view_as(grad))\n",
           replace="        grad = bucket[offset:offset + grad.numel()].view_as(grad)\n",
           why="rebinds a local name to the averaged slice instead of copying it into .grad: the gradients never change",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_ring_all_reduce",
           find=_RING_START, replace="    dist.all_reduce(tensor)\n    return None\n" + _RING_START,
           why="calls dist.all_reduce instead of writing the ring",
           caught_by="day17_ring_all_reduce_tests"),
    Mutant(cell="day17_ring_all_reduce",
           find=_RING_START,
           replace=("    received, outgoing = torch.empty_like(tensor), tensor.clone()\n"
                    "    for step in range(world_size - 1):\n"
                    "        requests = [dist.isend(outgoing, (rank + 1) % world_size),\n"
                    "                    dist.irecv(received, (rank - 1) % world_size)]\n"
                    "        for request in requests:\n"
                    "            request.wait()\n"
                    "        tensor.add_(received)\n"
                    "        outgoing = received.clone()\n"
                    "    return None\n" + _RING_START),
           why="passes the whole tensor around the ring: right sums, but (W-1) x the bytes instead of 2(W-1)/W",
           caught_by="day17_ring_all_reduce_tests"),
    Mutant(cell="day17_ring_all_reduce",
           find="chunks[recv].add_(incoming)", replace="chunks[recv].copy_(incoming)",
           why="the reduce-scatter overwrites the received chunk instead of adding it",
           caught_by="day17_ring_all_reduce_tests"),
    Mutant(cell="day17_ring_all_reduce",
           find="send, recv = (rank + 1 - step) % world_size, (rank - step) % world_size",
           replace="send, recv = (rank - step) % world_size, (rank - step - 1) % world_size",
           why="the all-gather reuses the reduce-scatter's chunk order (off by one: sends a chunk it has not completed)",
           caught_by="day17_ring_all_reduce_tests"),
    Mutant(cell="day17_ring_all_reduce",
           find="tensor.view(-1).tensor_split(world_size)", replace="tensor.view(-1).chunk(world_size)",
           why="torch.chunk returns fewer than world_size chunks for small tensors (e.g. 1 element on 2 ranks)",
           caught_by="day17_ring_all_reduce_tests"),
    Mutant(cell="day17_ring_all_reduce",
           find="tensor.view(-1).tensor_split(world_size)", replace="tensor.reshape(-1).clone().tensor_split(world_size)",
           why="works on a copy: the sum never reaches the caller's tensor (not in place)",
           caught_by="day17_ring_all_reduce_tests"),
]
