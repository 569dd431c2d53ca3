"""Day 05: correct answers to stratified_three_way_split and train_channel_stats, written other ways."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # --- Exercise 1: stratified_three_way_split
    Alternative(cell="day05_stratified_split",
                why="one permutation of all indices from the single generator, then each class's indices taken in "
                    "that shuffled order; boolean masks and np.sort at the end",
                source='''def stratified_three_way_split(labels, val_fraction: float, test_fraction: float, seed: int = 0):
    y = np.asarray(labels)
    generator = np.random.default_rng(seed)
    shuffled = generator.permutation(len(y))
    where = np.zeros(len(y), dtype=np.int8)            # 0 train, 1 val, 2 test
    for c in np.unique(y):
        members = shuffled[y[shuffled] == c]
        n_val, n_test = int(len(members) * val_fraction), int(len(members) * test_fraction)
        where[members[:n_val]] = 1
        where[members[n_val:n_val + n_test]] = 2
    return tuple(np.sort(np.flatnonzero(where == part)) for part in (0, 1, 2))
'''),
    Alternative(cell="day05_stratified_split",
                why="rng.choice without replacement per class, a dict of lists and Python's sorted",
                source='''def stratified_three_way_split(labels, val_fraction: float, test_fraction: float, seed: int = 0):
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    parts = {"train": [], "val": [], "test": []}
    for c in sorted(set(labels.tolist())):
        members = np.flatnonzero(labels == c)
        n_val = int(members.size * val_fraction)
        n_test = int(members.size * test_fraction)
        held = rng.choice(members, size=n_val + n_test, replace=False)
        parts["val"] += held[:n_val].tolist()
        parts["test"] += held[n_val:].tolist()
        parts["train"] += sorted(set(members.tolist()) - set(held.tolist()))
    return tuple(np.array(sorted(parts[k]), dtype=np.int64) for k in ("train", "val", "test"))
'''),
    # --- Exercise 2: train_channel_stats
    Alternative(cell="day05_channel_stats",
                why="index_select with a LongTensor, float64 statistics returned as float64, the population std "
                    "from the mean of squared deviations",
                source='''def train_channel_stats(images: torch.Tensor, train_idx) -> tuple[torch.Tensor, torch.Tensor]:
    rows = torch.as_tensor(list(train_idx), dtype=torch.long)
    x = images.index_select(0, rows).double().transpose(0, 1).reshape(images.shape[1], -1)   # (C, values)
    mean = x.mean(dim=1)
    std = ((x - mean[:, None]) ** 2).mean(dim=1).sqrt()
    return mean, std
'''),
    Alternative(cell="day05_channel_stats",
                why="torch.var_mean with correction=0 over the gathered rows, in the images' own dtype",
                source='''def train_channel_stats(images: torch.Tensor, train_idx) -> tuple[torch.Tensor, torch.Tensor]:
    picked = images[np.asarray(train_idx, dtype=np.int64)]
    var, mean = torch.var_mean(picked, dim=(0, 2, 3), correction=0)
    return mean, var.sqrt()
'''),
    Alternative(cell="day05_channel_stats",
                why="floating statistics for integer (uint8) images too: the output dtype chosen with "
                    "images.is_floating_point(), a metadata read of the whole tensor that copies nothing",
                find='''    x = images[torch.as_tensor(np.asarray(train_idx), dtype=torch.long)].to(torch.float64)
    mean = x.mean(dim=(0, 2, 3))
    std = x.std(dim=(0, 2, 3), correction=0)
    return mean.to(images.dtype), std.to(images.dtype)''',
                replace='''    out_dtype = images.dtype if images.is_floating_point() else torch.float32   # uint8 images: float statistics
    x = images[torch.as_tensor(np.asarray(train_idx), dtype=torch.long)].to(torch.float64)
    mean = x.mean(dim=(0, 2, 3))
    std = x.std(dim=(0, 2, 3), correction=0)
    return mean.to(out_dtype), std.to(out_dtype)'''),
    Alternative(cell="day05_channel_stats",
                why="returns the statistics with type_as(images): reads only the images' dtype, no operation on them",
                find="    return mean.to(images.dtype), std.to(images.dtype)\n",
                replace="    return mean.type_as(images), std.type_as(images)\n"),
]
