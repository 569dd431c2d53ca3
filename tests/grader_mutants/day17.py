"""Day 17: plausible wrong answers to shard_indices, bucketed average_gradients and the hand-written ring all-reduce."""
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
           find=("    for bucket in buckets:\n"
                 "        flat = torch.cat([grad.reshape(-1) for grad in bucket])   # one flat buffer: one collective per bucket\n"),
           replace=("    for grad in grads:\n"
                    "        dist.all_reduce(grad, op=dist.ReduceOp.SUM)\n"
                    "        grad.div_(world_size)\n"
                    "    buckets = []\n"
                    "    for bucket in buckets:\n"
                    "        flat = torch.cat([grad.reshape(-1) for grad in bucket])\n"),
           why="one all_reduce per parameter instead of buckets: right values, a collective per tensor",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="        if current and bucket_cap_bytes is not None and current_bytes + nbytes > bucket_cap_bytes:\n",
           replace="        if False:\n",
           why="ignores the cap: one bucket of every gradient, whatever bucket_cap_bytes says",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="current_bytes + nbytes > bucket_cap_bytes", replace="current_bytes + nbytes >= bucket_cap_bytes",
           why="closes a bucket when the next gradient would fill it exactly: one call more than needed",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find=("        if current and bucket_cap_bytes is not None and current_bytes + nbytes > bucket_cap_bytes:\n"
                 "            buckets.append(current)\n"
                 "            current, current_bytes = [], 0\n"
                 "        current.append(grad)\n"
                 "        current_bytes += nbytes\n"),
           replace=("        current.append(grad)\n"
                    "        current_bytes += nbytes\n"
                    "        if bucket_cap_bytes is not None and current_bytes > bucket_cap_bytes:\n"
                    "            buckets.append(current)\n"
                    "            current, current_bytes = [], 0\n"),
           why="adds the gradient first and closes the bucket after it overflows: buckets above the cap",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="            buckets.append(current)\n            current, current_bytes = [], 0\n",
           replace="            buckets.append(current)\n            current = []\n",
           why="forgets to reset the byte count of a new bucket: every later gradient opens a bucket of its own",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="    for bucket in buckets:\n",
           replace="    if world_size == 1:\n        return None\n    for bucket in buckets:\n",
           why="skips the collectives in a group of one (the text asks for them: the calls are counted there)",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="        dist.all_reduce(flat, op=dist.ReduceOp.SUM)\n        flat.div_(world_size)\n",
           replace=("        parts = [torch.empty_like(flat) for _ in range(world_size)]\n"
                    "        dist.all_gather(parts, flat)\n"
                    "        flat = torch.stack(parts).mean(0)\n"),
           why="averages with all_gather and a mean: right values, but W x the memory and bytes of an all_reduce",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="        dist.all_reduce(flat, op=dist.ReduceOp.SUM)\n        flat.div_(world_size)\n",
           replace=("        dist.reduce(flat, dst=0, op=dist.ReduceOp.SUM)\n"
                    "        flat.div_(world_size)\n"
                    "        dist.broadcast(flat, src=0)\n"),
           why="reduce to rank 0 then broadcast: right values, two collectives (and rank 0 a bottleneck)",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="    grads = [param.grad for param in model.parameters() if param.grad is not None]",
           replace=("    grads = [param.grad if param.grad is not None else torch.zeros_like(param)\n"
                    "             for param in model.parameters()]"),
           why="puts zeros for the parameters without a gradient into the buckets: more bytes than the gradients",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="torch.cat([grad.reshape(-1) for grad in bucket])",
           replace="torch.cat([grad.reshape(-1).double() for grad in bucket])",
           why="all-reduces the buckets in float64: right values, twice the bytes of the float32 gradients",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="torch.cat([grad.reshape(-1) for grad in bucket])",
           replace="torch.cat([grad.view(-1) for grad in bucket])",
           why="flattens with view: raises on a non-contiguous gradient (a channels_last convolution's), which the "
               "exercise text warns about",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="        flat.div_(world_size)\n", replace="        flat.div(world_size)\n",
           why="divides a copy (flat.div instead of div_): the gradients keep the sum",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="flat.div_(world_size)", replace="flat.div_(2)",
           why="divides by a hard-coded 2 instead of the process group's world size",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
           find="            grad.copy_(flat[offset:offset + grad.numel()].view_as(grad))\n",
           replace="            grad = flat[offset:offset + grad.numel()].view_as(grad)\n",
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
    Mutant(cell="day17_average_gradients",
           find="            grad.copy_(flat[offset:offset + grad.numel()].view_as(grad))\n",
           replace="            grad.reshape(-1).copy_(flat[offset:offset + grad.numel()])\n",
           why="copies the average back through reshape(-1): for a non-contiguous gradient (a channels_last "
               "convolution's) reshape returns a copy, so the average never reaches that gradient",
           caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
         find=("    buckets, current, current_bytes = [], [], 0\n"
               "    for grad in grads:                     # greedy, in order: close a bucket only when the next gradient won't fit\n"
               "        nbytes = grad.numel() * grad.element_size()\n"
               "        if current and bucket_cap_bytes is not None and current_bytes + nbytes > bucket_cap_bytes:\n"
               "            buckets.append(current)\n"
               "            current, current_bytes = [], 0\n"
               "        current.append(grad)\n"
               "        current_bytes += nbytes\n"
               "    if current:\n"
               "        buckets.append(current)\n"),
         replace=("    buckets, sizes = [], []\n"
                  "    for grad in grads:                     # first fit: the first bucket with room\n"
                  "        nbytes = grad.numel() * grad.element_size()\n"
                  "        for i in range(len(buckets)):\n"
                  "            if bucket_cap_bytes is None or sizes[i] + nbytes <= bucket_cap_bytes:\n"
                  "                buckets[i].append(grad)\n"
                  "                sizes[i] += nbytes\n"
                  "                break\n"
                  "        else:\n"
                  "            buckets.append([grad])\n"
                  "            sizes.append(nbytes)\n"),
         why="first-fit bin packing: a bucket gathers gradients that are not neighbours in model.parameters()",
         caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_average_gradients",
         find="torch.cat([grad.reshape(-1) for grad in bucket])",
         replace="torch.cat([grad.reshape(-1) for grad in bucket]).float()",
         why="all-reduces in float32 whatever the gradients' dtype: bf16 gradients travel at twice their bytes",
         caught_by="day17_average_gradients_tests"),
    Mutant(cell="day17_ring_all_reduce",
         find="incoming = torch.empty_like(chunks[recv])",
         replace="incoming = torch.empty(chunks[recv].shape)",
         why="a receive buffer in the default dtype (float32): a float64 or int64 tensor's messages do not fit it",
         caught_by="day17_ring_all_reduce_tests"),
    Mutant(cell='day17_average_gradients',
           find='        nbytes = grad.numel() * grad.element_size()\n',
           replace='        nbytes = grad.numel() * 4                # float32: 4 bytes\n',
           why='counts every gradient element as 4 bytes: bfloat16 buckets close at half the cap',
           caught_by='day17_average_gradients_tests'),
]
