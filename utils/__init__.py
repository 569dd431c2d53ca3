"""The course's shared helper package. Import what a notebook needs, e.g. ``from utils import course_setup``.

One concern per module: ``environment`` (versions, device choice, run size), ``seeding``, ``data``, ``models``,
``timing``, ``training``, ``plotting``; later days add their own modules (import them as ``utils.<module>``).
"""
from .data import DATASETS, DataSplits, DatasetUnavailableError, load_dataset, stratified_split
from .environment import (CourseRun, DeviceUnavailableError, course_setup, environment_report, hardware_label,
                          pick_device, smoke_mode, synchronize)
from .models import MODELS, build_model, count_parameters, resnet50, small_cnn
from .seeding import seed_everything
from .timing import Timing, time_fn
from .training import History, evaluate, fit, train_one_epoch

__all__ = [
    "DATASETS", "DataSplits", "DatasetUnavailableError", "load_dataset", "stratified_split",
    "CourseRun", "DeviceUnavailableError", "course_setup", "environment_report", "hardware_label", "pick_device",
    "smoke_mode", "synchronize",
    "MODELS", "build_model", "count_parameters", "resnet50", "small_cnn",
    "seed_everything", "Timing", "time_fn", "History", "evaluate", "fit", "train_one_epoch",
]
