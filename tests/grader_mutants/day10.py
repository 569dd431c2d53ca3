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
