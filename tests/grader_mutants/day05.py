"""Day 05 · Data and splits: plausible wrong answers to stratified_three_way_split and train_channel_stats."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day05_stratified_split",
           find="        idx = rng.permutation(idx)\n", replace="",
           why="the first samples of each class go to val and test, not a random draw",
           caught_by="day05_stratified_split_tests"),
    Mutant(cell="day05_stratified_split",
           find="n_val = int(len(idx) * val_fraction)", replace="n_val = round(len(idx) * val_fraction)",
           why="rounded the per-class validation count instead of truncating it",
           caught_by="day05_stratified_split_tests"),
    Mutant(cell="day05_stratified_split",
           find="np.sort(np.concatenate(part))", replace="np.concatenate(part)",
           why="the index arrays are grouped by class, not sorted",
           caught_by="day05_stratified_split_tests"),
    Mutant(cell="day05_stratified_split",
           find="test.append(idx[n_val:n_val + n_test])", replace="test.append(idx[:n_test])",
           why="the test samples are drawn from the same slice as the validation samples",
           caught_by="day05_stratified_split_tests"),
    Mutant(cell="day05_stratified_split",
           find="    rng = np.random.default_rng(seed)\n", replace="    rng = np.random.default_rng()\n",
           why="the seed is ignored: every call gives another split",
           caught_by="day05_stratified_split_tests"),
    Mutant(cell="day05_channel_stats",
           find="x = images[torch.as_tensor(np.asarray(train_idx), dtype=torch.long)].to(torch.float64)",
           replace="x = images.to(torch.float64)",
           why="statistics over all the images, held-out ones included (a leak)",
           caught_by="day05_channel_stats_tests"),
    Mutant(cell="day05_channel_stats",
           find="std = x.std(dim=(0, 2, 3), correction=0)", replace="std = x.std(dim=(0, 2, 3))",
           why="the unbiased (sample) std instead of the population std",
           caught_by="day05_channel_stats_tests"),
    Mutant(cell="day05_channel_stats",
           find="std = x.std(dim=(0, 2, 3), correction=0)", replace="std = x.std(dim=(2, 3), correction=0).mean(dim=0)",
           why="the mean of per-image stds instead of the std over all pixels of all images",
           caught_by="day05_channel_stats_tests"),
    Mutant(cell="day05_channel_stats",
           find="mean = x.mean(dim=(0, 2, 3))", replace="mean = x.mean(dim=(0, 1, 2))",
           why="channels taken as the last dimension (channels-last) instead of dim 1",
           caught_by="day05_channel_stats_tests"),
    Mutant(cell="day05_stratified_split",
           find="    rng = np.random.default_rng(seed)\n    train, val, test = [], [], []\n    for c in np.unique(labels):\n"
                "        idx = np.flatnonzero(labels == c)\n        idx = rng.permutation(idx)\n",
           replace="    np.random.seed(seed)\n    train, val, test = [], [], []\n    for c in np.unique(labels):\n"
                   "        idx = np.flatnonzero(labels == c)\n        idx = np.random.permutation(idx)\n",
           why="seeded NumPy's global generator and drew from it (every later np.random draw of the program changes)",
           caught_by="day05_stratified_split_tests"),
    Mutant(cell="day05_stratified_split",
           find="        idx = rng.permutation(idx)\n",
           replace="        torch.manual_seed(seed)\n        idx = idx[torch.randperm(len(idx)).numpy()]\n",
           why="shuffled with torch.manual_seed and randperm: the global torch generator is reseeded",
           caught_by="day05_stratified_split_tests"),
    Mutant(cell="day05_stratified_split",
           find="        idx = rng.permutation(idx)\n",
           replace="        idx = np.random.default_rng(seed).permutation(idx)\n",
           why="a fresh generator with the same seed for every class (classes of one size split in one pattern)",
           caught_by="day05_stratified_split_tests"),
    Mutant(cell="day05_channel_stats",
           find="x = images[torch.as_tensor(np.asarray(train_idx), dtype=torch.long)].to(torch.float64)",
           replace="x = images.to(torch.float64)[torch.as_tensor(np.asarray(train_idx), dtype=torch.long)]",
           why="converted the whole images tensor to float64, then selected the training rows (copies every image)",
           caught_by="day05_channel_stats_tests"),
    Mutant(cell="day05_channel_stats",
           find="x = images[torch.as_tensor(np.asarray(train_idx), dtype=torch.long)].to(torch.float64)",
           replace="x = torch.stack([images[int(i)] for i in np.asarray(train_idx)]).to(torch.float64)",
           why="gathered the training images one by one in a Python loop",
           caught_by="day05_channel_stats_tests"),
    Mutant(cell="day05_stratified_split",
           find="def stratified_three_way_split(labels, val_fraction: float, test_fraction: float, seed: int = 0):\n"
                "    ### BEGIN SOLUTION\n    labels = np.asarray(labels)\n    rng = np.random.default_rng(seed)\n"
                "    train, val, test = [], [], []\n    for c in np.unique(labels):\n",
           replace="from numpy.random import default_rng\n\n"
                   "def stratified_three_way_split(labels, val_fraction: float, test_fraction: float, seed: int = 0):\n"
                   "    ### BEGIN SOLUTION\n    labels = np.asarray(labels)\n"
                   "    train, val, test = [], [], []\n    for c in np.unique(labels):\n        rng = default_rng(seed)\n",
           why="a fresh generator with the same seed for every class, made by a default_rng imported by name at the "
               "top of the cell (the counter that patches np.random.default_rng does not see it)",
           caught_by="day05_stratified_split_tests"),
    Mutant(cell="day05_stratified_split",
         find="def stratified_three_way_split(labels, val_fraction: float, test_fraction: float, seed: int = 0):\n"
              "    ### BEGIN SOLUTION\n    labels = np.asarray(labels)\n    rng = np.random.default_rng(seed)\n"
              "    train, val, test = [], [], []\n    for c in np.unique(labels):\n",
         replace="from numpy.random import default_rng\n\n\n"
                 "def stratified_three_way_split(labels, val_fraction: float, test_fraction: float, seed: int = 0):\n"
                 "    ### BEGIN SOLUTION\n    labels = np.asarray(labels)\n"
                 "    train, val, test = [], [], []\n    for c in np.unique(labels):\n"
                 "        rng = default_rng([seed, int(c)])\n",
         why="a generator per class seeded with (seed, class), made by a default_rng imported by name: classes "
             "split differently, but not from one generator",
         caught_by="day05_stratified_split_tests"),
]
