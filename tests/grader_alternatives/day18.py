"""Day 18: correct fixes of the section-2 script written other ways, and correct sharded evaluations."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # Exercise 1: the same four fixes, other spellings.
    Alternative(cell="day18_fix_ddp_script", why="str.replace chains; rank == 0; ddp.module.state_dict(); "
                "map_location='cpu' then .to(device) in the comparison", source='''# FIXED_SCRIPT: the text of TRAIN_SCRIPT with its four bugs fixed.
FIXED_SCRIPT = (TRAIN_SCRIPT
    .replace("for epoch in range(args.epochs):\\n",
             "for epoch in range(args.epochs):\\n    sampler.set_epoch(epoch)\\n")
    .replace('atomic_save({"model": ddp.state_dict(), "epochs": args.epochs, "world_size": world}, out / "checkpoint.pt",\\n'
             '            keep_previous=False)',
             'if rank == 0:\\n'
             '    atomic_save({"model": ddp.module.state_dict(), "epochs": args.epochs, "world_size": world},\\n'
             '                out / "checkpoint.pt", keep_previous=False)')
    .replace('state = torch.load(out / "checkpoint.pt")["model"]',
             'state = torch.load(out / "checkpoint.pt", map_location="cpu")["model"]')
    .replace("mine = ddp.state_dict()", "mine = ddp.module.state_dict()")
    .replace("params = dict(ddp.named_parameters())", "params = dict(ddp.module.named_parameters())"))
assert FIXED_SCRIPT.count("set_epoch") == 1 and "if rank == 0:" in FIXED_SCRIPT
'''),
    Alternative(cell="day18_fix_ddp_script", why="strips the module. prefix from the wrapper's state dict, "
                "guards with dist.get_rank() == 0 and loads with utils.checkpoint.load_checkpoint", source='''# FIXED_SCRIPT: the text of TRAIN_SCRIPT with its four bugs fixed.
lines = TRAIN_SCRIPT.splitlines()
fixed = []
for line in lines:
    if line.startswith("atomic_save("):
        fixed.append("if dist.get_rank() == 0:")
        fixed.append('    plain = {k[len("module."):]: v for k, v in ddp.state_dict().items()}')
        fixed.append('    atomic_save({"model": plain, "epochs": args.epochs, "world_size": world}, out / "checkpoint.pt",')
    elif line.strip().startswith("keep_previous=False)"):
        fixed.append("                keep_previous=False)")
    elif line.startswith('state = torch.load('):
        fixed.append("from utils.checkpoint import load_checkpoint")
        fixed.append('state = load_checkpoint(out / "checkpoint.pt", map_location=device)["model"]')
    elif line.startswith("mine = ddp.state_dict()"):
        fixed.append('mine = {k[len("module."):]: v for k, v in ddp.state_dict().items()}')
    elif line.startswith("params = dict(ddp.named_parameters())"):
        fixed.append("params = dict(model.named_parameters())")
    elif line.strip().startswith("ddp.train()"):
        fixed.append("    sampler.set_epoch(epoch)")
        fixed.append(line)
    else:
        fixed.append(line)
FIXED_SCRIPT = "\\n".join(fixed) + "\\n"
'''),
    # Exercise 2: another way to take this rank's share, other count dtypes.
    Alternative(cell="day18_evaluate_sharded", why="slices images[rank::W], inference_mode, int64 counts whose "
                "quotient torch computes in float32", source='''def evaluate_sharded(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = images[rank::world], labels[rank::world]
    model.eval()
    with torch.inference_mode():
        correct = (model(x).argmax(dim=1) == y).sum()
    counts = torch.stack([correct, torch.tensor(len(y))])
    dist.all_reduce(counts, op=dist.ReduceOp.SUM)
    return (counts[0] / counts[1]).item()
'''),
    Alternative(cell="day18_evaluate_sharded", why="DistributedSampler(shuffle=False) with its padding cut off, "
                "float32 counts, a rank without samples skips the forward", source='''def evaluate_sharded(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    from torch.utils.data.distributed import DistributedSampler
    rank, world = dist.get_rank(), dist.get_world_size()
    sampler = DistributedSampler(range(len(images)), num_replicas=world, rank=rank, shuffle=False)
    mine = list(sampler)[:len(range(rank, len(images), world))]      # without the padding
    correct = 0
    model.eval()
    if mine:
        with torch.no_grad():
            correct = int((model(images[mine]).argmax(1) == labels[mine]).sum())
    totals = torch.tensor([float(correct), float(len(mine))])
    dist.all_reduce(totals)
    return float(totals[0] / totals[1])
'''),
    Alternative(cell="day18_evaluate_sharded", why="all_reduce imported by name from torch.distributed at the top "
                "of the cell (the test watches the answer's own names as well as the module's)",
                source='''from torch.distributed import all_reduce, get_rank, get_world_size


def evaluate_sharded(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    rank, world_size = get_rank(), get_world_size()
    mine = torch.arange(rank, len(images), world_size)
    model.eval()
    with torch.no_grad():
        predictions = model(images[mine]).argmax(dim=1)
    counts = torch.tensor([(predictions == labels[mine]).sum().item(), len(mine)], dtype=torch.float64)
    all_reduce(counts)
    return (counts[0] / counts[1]).item()
'''),
]
