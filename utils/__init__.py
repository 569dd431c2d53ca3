"""The course's shared helper package. Import what a notebook needs, e.g. ``from utils import course_setup``.

One concern per module, in layers; a module imports only from its own layer or the layers below it:

* low: ``device`` (pick the device, synchronise it), ``seeding``; ``environment`` (the hardware and software
  report) and ``course`` (notebook start-up: run size, banner) on top of them;
* middle: ``data``, ``models``, ``timing``, ``training``, ``memory``, ``plotting``, ...;
* distributed: ``distributed`` (inside a worker: rank, device, joining the group), ``launch`` (run a script on
  N processes: torchrun or by hand), ``processes`` (run a function on N processes), ``dist_tools`` (teaching tools), ``elastic_train`` (a training
  job that torchrun's agents restart after a killed rank, resuming from its snapshot);
* high: analysis and export modules that later days add (import them as ``utils.<module>``).
"""
from .course import CourseRun, course_setup, smoke_mode
from .data import DATASETS, DataSplits, DatasetUnavailableError, load_dataset, stratified_split
from .device import DeviceUnavailableError, pick_device, synchronize
from .environment import environment_report, hardware_label
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
