"""Day 10 · DataLoader tuning: plausible wrong answers the hidden tests must catch."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day10_dict_collate", find='"pixels": torch.stack(', replace='"pixels": torch.cat(',
           why="concatenated the images instead of stacking them into a new batch dimension",
           caught_by="day10_dict_collate_tests"),
    Mutant(cell="day10_dict_collate", find="dtype=torch.int64", replace="dtype=torch.int32",
           why="int32 labels (cross_entropy wants int64)", caught_by="day10_dict_collate_tests"),
    Mutant(cell="day10_dict_collate", find="dtype=torch.int64", replace="dtype=torch.as_tensor(y0).dtype",
           why="used a notebook variable inside the collate_fn, which a spawn worker cannot see",
           caught_by="day10_dict_collate_tests"),
    Mutant(cell="day10_numpy_shift", find="if self._rng is None or self._rng_seed != seed:",
           replace="if self._rng is None:",
           why="made the generator once, on first use: a look at dataset[0] in the main process creates it, and every "
               "worker gets a copy with the same state (all workers draw the same shifts)",
           caught_by="day10_numpy_shift_tests"),
    Mutant(cell="day10_numpy_shift",
           find="        if self._rng is None or self._rng_seed != seed:\n"
                "            self._rng, self._rng_seed = np.random.default_rng(seed), seed\n",
           replace="        if self._rng is None:\n            self._rng = np.random.default_rng(0)\n",
           why="seeded the generator with a constant: every worker draws the same shifts", caught_by="day10_numpy_shift_tests"),
    Mutant(cell="day10_numpy_shift", find="np.random.default_rng(seed), seed", replace="np.random.default_rng(), seed",
           why="an unseeded generator (fresh OS entropy): workers differ, but the same loader seed no longer repeats the run",
           caught_by="day10_numpy_shift_tests"),
    Mutant(cell="day10_numpy_shift", find="dy, dx = self._rng.integers(-self.max_shift, self.max_shift + 1, size=2)",
           replace="dy, dx = np.random.randint(-self.max_shift, self.max_shift + 1, size=2)",
           why="drew from the global NumPy RNG (the DataLoader reseeds it in workers, but it moves everyone else's stream)",
           caught_by="day10_numpy_shift_tests"),
    Mutant(cell="day10_numpy_shift", find="seed = torch.initial_seed()",
           replace="seed = getattr(torch.utils.data.get_worker_info(), 'id', 0)",
           why="seeded from the worker id: workers differ, but every epoch and every loader seed repeats the same shifts",
           caught_by="day10_numpy_shift_tests"),
    Mutant(cell="day10_numpy_shift",
           find="        if self._rng is None or self._rng_seed != seed:\n"
                "            self._rng, self._rng_seed = np.random.default_rng(seed), seed\n",
           replace="        self._rng = np.random.default_rng(seed)\n",
           why="a new generator from the worker's seed for every item: every item of a worker gets the same shift",
           caught_by="day10_numpy_shift_tests"),
    Mutant(cell="day10_numpy_shift", find="self.max_shift + 1, size=2", replace="self.max_shift, size=2",
           why="integers() excludes the upper end: shifts of +max_shift never happen", caught_by="day10_numpy_shift_tests"),
    Mutant(cell="day10_cached_dataset", find="        self.cache = {}\n",
           replace="        self.cache = type(self).__dict__.get('shared', {})\n        type(self).shared = self.cache\n",
           why="kept the cache on the class, so every dataset shares one (validation gets training images)",
           caught_by="day10_cached_dataset_tests"),
    Mutant(cell="day10_cached_dataset", find="            self.cache[i] = self.base[i]\n        image, label = self.cache[i]\n"
                                           "        if self.transform is not None:\n            image = self.transform(image)\n",
           replace="            image, label = self.base[i]\n            if self.transform is not None:\n"
                   "                image = self.transform(image)\n            self.cache[i] = image, label\n"
                   "        image, label = self.cache[i]\n",
           why="cached the augmented image, so every epoch sees the same random crop",
           caught_by="day10_cached_dataset_tests"),
    Mutant(cell="day10_cached_dataset", find="        if i not in self.cache:\n            self.cache[i] = self.base[i]\n",
           replace="        self.cache[i] = self.base[i]\n",
           why="read the base dataset on every access (the cache is never used)", caught_by="day10_cached_dataset_tests"),
]
