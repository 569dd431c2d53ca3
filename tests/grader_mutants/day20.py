"""Day 20: plausible wrong answers to the ZeRO calculator and to ZeRO-1/2 written by hand."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day20_zero_bytes_per_rank",
           find="shard = math.ceil(num_params / world_size)", replace="shard = num_params // world_size",
           why="rounds the shard down: the padded flat buffer holds ceil(P / N) elements per rank",
           caught_by="day20_zero_bytes_per_rank_tests"),
    Mutant(cell="day20_zero_bytes_per_rank",
           find="params = (shard if stage >= 3 else num_params)", replace="params = (shard if stage >= 2 else num_params)",
           why="stage 2 shards the parameters too (only stage 3 does)",
           caught_by="day20_zero_bytes_per_rank_tests"),
    Mutant(cell="day20_zero_bytes_per_rank",
           find="grads = (shard if stage >= 2 else num_params)", replace="grads = (shard if stage >= 1 else num_params)",
           why="stage 1 shards the gradients too (only the optimizer state)",
           caught_by="day20_zero_bytes_per_rank_tests"),
    Mutant(cell="day20_reduce_scatter_gradients",
           find="    return shard / world_size", replace="    return shard",
           why="returns the sum over ranks, not the average",
           caught_by="day20_reduce_scatter_gradients_tests"),
    Mutant(cell="day20_reduce_scatter_gradients",
           find="    shard = torch.empty(shard_size, dtype=flat.dtype, device=flat.device)\n"
                "    dist.reduce_scatter(shard, list(flat.chunk(world_size)), op=dist.ReduceOp.SUM)\n",
           replace="    dist.all_reduce(flat)\n"
                   "    shard = flat[dist.get_rank() * shard_size:(dist.get_rank() + 1) * shard_size].clone()\n",
           why="all-reduces the whole gradient and keeps a slice: right values, twice the traffic of a reduce-scatter",
           caught_by="day20_reduce_scatter_gradients_tests"),
    Mutant(cell="day20_reduce_scatter_gradients",
           find="    shard = torch.empty(shard_size, dtype=flat.dtype, device=flat.device)\n"
                "    dist.reduce_scatter(shard, list(flat.chunk(world_size)), op=dist.ReduceOp.SUM)\n",
           replace="    pieces = [torch.empty(shard_size) for _ in range(world_size)]\n"
                   "    dist.all_gather(pieces, flat[dist.get_rank() * shard_size:(dist.get_rank() + 1) * shard_size])\n"
                   "    shard = flat[dist.get_rank() * shard_size:(dist.get_rank() + 1) * shard_size] * world_size\n",
           why="never combines the ranks' gradients: keeps its own gradient shard (times W, to look averaged)",
           caught_by="day20_reduce_scatter_gradients_tests"),
    Mutant(cell="day20_sharded_optimizer",
           find="    master_shard = flat[rank * size:(rank + 1) * size].clone()       # its own memory: only S elements\n"
                "    return master_shard, torch.optim.Adam([master_shard], lr=lr)",
           replace="    master_shard = flat[rank * size:(rank + 1) * size]\n"
                   "    return master_shard, torch.optim.Adam([master_shard], lr=lr)",
           why="the master shard is a view of the full padded buffer, which it keeps alive: no memory saved",
           caught_by="day20_sharded_optimizer_tests"),
    Mutant(cell="day20_sharded_optimizer",
           find="    dist.all_gather(list(full.chunk(world_size)), master_shard.detach())\n",
           replace="    full.zero_()\n"
                   "    rank = dist.get_rank()\n"
                   "    full[rank * master_shard.numel():(rank + 1) * master_shard.numel()] = master_shard.detach()\n"
                   "    dist.all_reduce(full)\n",
           why="rebuilds the parameters with an all-reduce of a zero-filled buffer instead of an all-gather",
           caught_by="day20_sharded_optimizer_tests"),
    Mutant(cell="day20_sharded_optimizer",
           find="    master_shard.grad = grad_shard\n", replace="",
           why="never gives the shard its gradient: Adam skips a parameter without .grad",
           caught_by="day20_sharded_optimizer_tests"),
    Mutant(cell="day20_sharded_optimizer",
           find="    dist.all_gather(list(full.chunk(world_size)), master_shard.detach())\n",
           replace="    full = torch.cat([torch.cat([p.detach().reshape(-1) for p in params]),\n"
                   "                      torch.zeros(full.numel() - sum(p.numel() for p in params))])\n"
                   "    rank = dist.get_rank()\n"
                   "    full[rank * master_shard.numel():(rank + 1) * master_shard.numel()] = master_shard.detach()\n",
           why="no all-gather: each rank copies back only its own updated shard, the replicas drift apart",
           caught_by="day20_sharded_optimizer_tests"),
    Mutant(cell="day20_zero_bytes_per_rank",
           find="grads = (shard if stage >= 2 else num_params) * bytes_grad",
           replace="grads = (shard if stage >= 2 else num_params) * bytes_param",
           why="counts the gradients at the parameters' bytes per element: wrong for bf16 weights with fp32 gradients",
           caught_by="day20_zero_bytes_per_rank_tests"),
    Mutant(cell='day20_zero_bytes_per_rank',
           find='    params = (shard if stage >= 3 else num_params) * bytes_param\n    grads = (shard if stage >= 2 else num_params) * bytes_grad\n    optim = (shard if stage >= 1 else num_params) * bytes_optim\n',
           replace='    padded = shard * world_size                  # the flat tensor, padded to split evenly\n    params = (shard if stage >= 3 else padded) * bytes_param\n    grads = (shard if stage >= 2 else padded) * bytes_grad\n    optim = (shard if stage >= 1 else padded) * bytes_optim\n',
           why="counts a replicated part at the padded size W * ceil(P / W) instead of P",
           caught_by='day20_zero_bytes_per_rank_tests'),
    Mutant(cell='day20_reduce_scatter_gradients',
           find='    shard_size = -(-flat.numel() // world_size)\n',
           replace='    shard_size = flat.numel() // world_size + 1\n',
           why="shard size n // W + 1: one element too many whenever W divides n",
           caught_by='day20_reduce_scatter_gradients_tests'),
    Mutant(cell='day20_reduce_scatter_gradients',
           find='    flat = nn.functional.pad(flat, (0, world_size * shard_size - flat.numel()))   # zeros at the end\n',
           replace='    flat = nn.functional.pad(flat, (0, world_size - flat.numel() % world_size))   # zeros at the end\n    shard_size = flat.numel() // world_size\n',
           why="pads by W - n % W: a whole extra row of W zeros when W divides n",
           caught_by='day20_reduce_scatter_gradients_tests'),
    Mutant(cell='day20_sharded_optimizer',
           find='    size = -(-flat.numel() // world_size)\n',
           replace='    size = flat.numel() // world_size + 1\n',
           why="the master shard size as n // W + 1: one element too many when W divides n",
           caught_by='day20_sharded_optimizer_tests'),
    Mutant(cell='day20_zero_bytes_per_rank',
           find='    if world_size < 1:',
           replace='    if world_size == 0:                      # guard the division',
           why='guards only a world size of 0: a negative one gives negative byte counts',
           caught_by='day20_zero_bytes_per_rank_tests'),
]
