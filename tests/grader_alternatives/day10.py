"""Day 10 · DataLoader tuning: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    Alternative(cell="day10_pad_collate",
                why="stacks torch.tensor(label) per sample: a 0-d tensor label makes torch warn on stderr",
                find="labels = torch.tensor([int(label) for _, label in batch], dtype=torch.int64)",
                replace="labels = torch.stack([torch.tensor(label, dtype=torch.int64) for _, label in batch])"),
    # Exercise 1 · pad_collate
    Alternative(cell="day10_pad_collate",
                why="F.pad on each image and on a mask of ones, then torch.stack; labels through torch.as_tensor().long()",
                source='''def pad_collate(batch: list) -> dict:
    import torch.nn.functional as F
    height = max(x.shape[1] for x, _ in batch)
    width = max(x.shape[2] for x, _ in batch)
    pixels, masks = [], []
    for x, _ in batch:
        pad = (0, width - x.shape[2], 0, height - x.shape[1])      # left, right, top, bottom
        pixels.append(F.pad(x, pad))
        masks.append(F.pad(torch.ones(x.shape[1:], dtype=torch.uint8), pad).bool())
    labels = torch.as_tensor([int(y) for _, y in batch]).long()
    return {"pixels": torch.stack(pixels), "mask": torch.stack(masks), "labels": labels}
'''),
    Alternative(cell="day10_pad_collate",
                why="masks from the sizes by broadcasting aranges, pixels copied with zip; labels stacked as 0-d tensors",
                source='''def pad_collate(batch):
    sizes = torch.tensor([list(img.shape[-2:]) for img, _ in batch])          # (B, 2): heights, widths
    H, W = (int(v) for v in sizes.max(dim=0).values)
    first = batch[0][0]
    out = torch.zeros(len(batch), first.shape[0], H, W, dtype=first.dtype)
    for slot, (img, _) in zip(out, batch):
        slot[:, : img.shape[1], : img.shape[2]].copy_(img)
    rows = torch.arange(H).view(1, H, 1) < sizes[:, 0].view(-1, 1, 1)
    cols = torch.arange(W).view(1, 1, W) < sizes[:, 1].view(-1, 1, 1)
    labels = torch.stack([torch.as_tensor(y).reshape(()).to(torch.int64) for _, y in batch])
    return dict(pixels=out, mask=rows & cols, labels=labels)
'''),
    # Exercise 2 · NumpyShift
    Alternative(cell="day10_numpy_shift",
                why="seeds from get_worker_info().seed inside workers (torch.initial_seed() outside), re-made when it "
                    "changes; draws with endpoint=True",
                source='''class NumpyShift(Dataset):
    def __init__(self, base, max_shift: int = 2):
        self.base = base
        self.max_shift = max_shift
        self.rng, self.rng_seed = None, None

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        info = torch.utils.data.get_worker_info()
        seed = info.seed if info is not None else torch.initial_seed()
        if seed != self.rng_seed:
            self.rng, self.rng_seed = np.random.default_rng(seed), seed
        dy = int(self.rng.integers(-self.max_shift, self.max_shift, endpoint=True))
        dx = int(self.rng.integers(-self.max_shift, self.max_shift, endpoint=True))
        image, label = self.base[i]
        return torch.roll(image, shifts=(dy, dx), dims=(1, 2)), label
'''),
    Alternative(cell="day10_numpy_shift",
                why="re-makes the generator whenever the process or its torch seed changes (a pid check), from a "
                    "SeedSequence and PCG64; rolls with Tensor.roll",
                source='''class NumpyShift(Dataset):
    def __init__(self, base, max_shift: int = 2):
        self.base, self.max_shift = base, max_shift
        self._owner = None
        self._gen = None

    def __len__(self):
        return len(self.base)

    def _generator(self):
        owner = (os.getpid(), torch.initial_seed())
        if owner != self._owner:
            self._owner = owner
            self._gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence(torch.initial_seed())))
        return self._gen

    def __getitem__(self, i):
        dy, dx = self._generator().integers(-self.max_shift, self.max_shift + 1, size=2).tolist()
        image, label = self.base[i]
        return image.roll((dy, dx), dims=(-2, -1)), label
'''),
    # Exercise 3 · CachedDataset and cached_loader
    Alternative(cell="day10_cached_dataset",
                why="design 1: fills the cache in the main process before the loader starts its workers (forked "
                    "workers inherit it), no persistent workers; the cache is a list",
                source='''class CachedDataset(Dataset):
    def __init__(self, base, transform=None):
        self.base = base
        self.transform = transform
        self.items = [None] * len(base)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        if self.items[i] is None:
            self.items[i] = self.base[i]
        image, label = self.items[i]
        return (self.transform(image) if self.transform else image), label


def cached_loader(base, transform, batch_size, num_workers, generator):
    dataset = CachedDataset(base, transform)
    for i in range(len(base)):          # decode everything once, here, before any worker exists
        if dataset.items[i] is None:
            dataset.items[i] = base[i]
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=generator, num_workers=num_workers)
'''),
    Alternative(cell="day10_cached_dataset",
                why="lazy caches with persistent workers passed through a kwargs dict only when there are workers; "
                    "dict.get instead of 'in'",
                source='''class CachedDataset(Dataset):
    def __init__(self, base, transform=None):
        self.base, self.transform = base, transform
        self._decoded = dict()

    def __len__(self):
        return len(self.base)

    def __getitem__(self, index):
        item = self._decoded.get(index)
        if item is None:
            item = self._decoded[index] = self.base[index]
        image, label = item
        if self.transform is not None:
            image = self.transform(image)
        return image, label


def cached_loader(base, transform, batch_size, num_workers, generator):
    extra = {"persistent_workers": True} if num_workers > 0 else {}
    return DataLoader(CachedDataset(base, transform), batch_size, shuffle=True, num_workers=num_workers,
                      generator=generator, **extra)
'''),
    Alternative(cell="day10_cached_dataset",
                why="keeps the wrapped dataset as self.dataset (the text names no attribute) and the cache as self._memo, "
                    "filled through try/except KeyError; persistent_workers=bool(num_workers)",
                source='''class CachedDataset(Dataset):
    def __init__(self, base, transform=None):
        self.dataset = base
        self.transform = transform
        self._memo = {}

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        try:
            image, label = self._memo[i]
        except KeyError:
            image, label = self._memo[i] = self.dataset[i]
        return (image if self.transform is None else self.transform(image)), label


def cached_loader(base, transform, batch_size: int, num_workers: int, generator: torch.Generator) -> DataLoader:
    return DataLoader(CachedDataset(base, transform), batch_size=batch_size, shuffle=True, generator=generator,
                      num_workers=num_workers, persistent_workers=bool(num_workers))
'''),
    Alternative(cell="day10_pad_collate",
                why="torch.nn.functional.pad on the right and bottom of each image and of a ones mask, then torch.stack; "
                    "zip(*batch) to split images and labels",
                source='''def pad_collate(batch: list) -> dict:
    images, labels = zip(*batch)
    height = max(im.shape[-2] for im in images)
    width = max(im.shape[-1] for im in images)
    pixels = torch.stack([torch.nn.functional.pad(im, (0, width - im.shape[-1], 0, height - im.shape[-2])) for im in images])
    mask = torch.stack([torch.nn.functional.pad(torch.ones(im.shape[-2:], dtype=torch.bool), (0, width - im.shape[-1], 0, height - im.shape[-2]))
                        for im in images])
    return {"pixels": pixels, "mask": mask, "labels": torch.as_tensor([int(y) for y in labels], dtype=torch.long)}
'''),
]
