"""Parts of ``tools/gpu_check.py``: the per-day recorders of Part B (:mod:`gpu_check.recorders`) and the notebook
runner of Part A (:mod:`gpu_check.notebooks`). Run the kit through ``python tools/gpu_check.py``."""
