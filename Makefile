# One command to set up and start the course, one to set up and test it. See README.md.
# Setup is idempotent: packages are reinstalled only when the lock file, pyproject.toml or the PyTorch build the
# machine needs (tools/torch_build.py: TORCH=auto|default|cu126|cu130|cu132|cpu, TENSORRT=1) change.
# make 3.81 (macOS's) ignores .SHELLFLAGS: the recipes with a pipe set pipefail themselves.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
# Some machines' pip config lists local package indexes that do not exist; pip then warns once per package.
QUIET_PIP := 2>&1 | { grep --line-buffered -v "is ignored: it is neither a file nor a directory" || true; }
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Three workers on the 2-core CI machine: each notebook kernel gets one thread, and while one worker's test waits (on
# a subprocess, a sleep, a kernel starting) the third keeps both cores busy. `make test` on a quiet 2-core machine:
# 22 min 08 s with 2 workers, 19 min 29 s with 3 (4 December 2026; 26 min 54 s with 3 on 5 December, with more graded
# answers). On a bigger machine, PYTEST_WORKERS=N.
PYTEST_WORKERS ?= 3

.PHONY: setup lab workspace update test test-fast test-grader run days hooks audit clean-venv

# One day instead of all: `make days DAY=07`, `make test DAY=07` (DAY=07 and DAY=day07 both work).
DAY_ID := $(if $(DAY),day$(patsubst day%,%,$(DAY)))
# The test files whose ids name their day: `make test DAY=NN` runs their tests for that day (pytest -k dayNN).
DAY_TESTS := tests/test_grading.py tests/test_grader_mutants.py tests/test_grader_alternatives.py
CHECK_DAY = @test -d solutions/$(DAY_ID) || { echo "no solutions/$(DAY_ID): DAY is a two-digit day, e.g. DAY=07"; exit 2; }

setup: $(STAMP)

# The PyTorch build: empty TORCH keeps a build that works here and detects one otherwise (nvidia-smi); TORCH=auto
# always detects. Checked on every run (it also checks the Python version, against pyproject.toml's
# requires-python); the file changes only when the answer does, and only then does the install below run again.
TORCH ?=
TENSORRT ?=
BUILD_CHOICE := $(VENV)/.torch-build
SETUP_PYTHON = $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))

$(BUILD_CHOICE): FORCE
	@mkdir -p $(VENV)
	@$(SETUP_PYTHON) tools/torch_build.py choose --torch "$(TORCH)" --tensorrt "$(TENSORRT)" --venv $(VENV) --write $@

# .jupyter/nbgrader_config.py goes into the environment's etc/jupyter/, where nbgrader finds it from any folder.
# A venv without pip (Ubuntu's python3 without python3-venv stops half-way) is made again: venv completes it.
$(STAMP): requirements-lock.txt pyproject.toml tools/torch_build.py .jupyter/nbgrader_config.py $(BUILD_CHOICE)
	$(BIN)/python -m pip --version >/dev/null 2>&1 || $(PYTHON) -m venv $(VENV)
	set -o pipefail; $(BIN)/python tools/torch_build.py install --choice $(BUILD_CHOICE) $(QUIET_PIP)
	set -o pipefail; $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . $(QUIET_PIP)
	mkdir -p $(VENV)/etc/jupyter && cp .jupyter/nbgrader_config.py $(VENV)/etc/jupyter/nbgrader_config.py
	$(BIN)/python -c 'import torch, torchvision, nbgrader, papermill, utils; print(f"setup ok: torch {torch.__version__} (CUDA {torch.version.cuda}) | utils from {utils.__file__}")'
	touch $(STAMP)

FORCE:

## The main command: set everything up, copy the days into your own workspace and open Day 01 in JupyterLab
## (offline, on the bundled dataset). .jupyter/ holds the learner's lab settings: no instructor panels (the Validate
## button stays), no news prompt. --allow-root only where the shell really is root (containers, CI); learners run as
## themselves. The lab's root is the workspace: your copies, never the tracked days/.
WORKSPACE ?= workspace
DAY01_NOTEBOOK := $(notdir $(firstword $(wildcard days/day01/*.ipynb)))
lab: setup workspace
	JUPYTER_CONFIG_PATH="$(CURDIR)/.jupyter$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH))" \
		$(BIN)/jupyter lab --ServerApp.root_dir="$(abspath $(WORKSPACE))" \
		--LabApp.default_url="/lab/tree/day01/$(DAY01_NOTEBOOK)" \
		$(if $(filter 0,$(shell id -u)),--allow-root,) $(LAB_ARGS)

## Your own copy of the course (git ignores it): new days are copied in, days the course updated are brought in with
## your answers carried over (your previous notebook is kept in workspace/previous/), nothing is deleted
## (tools/workspace.py).
workspace:
	@$(SETUP_PYTHON) tools/workspace.py sync --workspace "$(WORKSPACE)"

## Course updates: pull the course, then bring new and updated days into your workspace.
update:
	git pull --ff-only
	@$(MAKE) --no-print-directory workspace

## The test command (.ci/run calls exactly this): set everything up and run the whole suite. Of the plausible wrong
## answers in tests/grader_mutants/ it grades the first one of every exercise (about one notebook run a day), and of
## the correct ones in tests/grader_alternatives/ the first of every exercise, both inside the round trip's single
## nbgrader run per day.
## With DAY=NN: only that day's round trip (days/ freshness, the solution run top to bottom, blank 0, solution and
## first alternatives full marks, under noisy libraries) and the first wrong answer of each of its exercises (the
## edit loop; `make test-grader DAY=NN` grades all of that day's wrong and correct answers).
test: setup
	$(if $(DAY_ID),$(CHECK_DAY))
	GRADER_MUTANTS=1 GRADER_ALTERNATIVES=first $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal --timeout 900 \
		$(if $(DAY_ID),-k "$(DAY_ID)" $(DAY_TESTS))

## Grading both ways, in full: every plausible wrong answer in tests/grader_mutants/ must lose points and every
## plausible correct one in tests/grader_alternatives/ must keep full marks; DAY=NN for one day. Run it after changing
## an exercise or its tests (CI runs `make test`, which grades the first of each).
test-grader: setup
	$(if $(DAY_ID),$(CHECK_DAY))
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist worksteal --timeout 1800 tests/test_grader_mutants.py \
		tests/test_grader_alternatives.py $(if $(DAY_ID),-k "$(DAY_ID)")

## Unit tests only: no notebook, nbgrader, benchmark, subprocess or multi-process test (see the markers in
## pyproject.toml), for quick iteration on utils.
test-fast: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m "not notebooks and not slow"

## One day's solution run top to bottom as a learner's Run All would, with its default parameters (DEVICE=cpu unless
## RUN_DEVICE says otherwise; SMOKE=1 for the smoke size), into build/runs/ (the repository is never written to);
## prints its wall time and CPU time (user + sys, the kernel included). The "Time." line of a day's header gives the
## CPU time of `OMP_NUM_THREADS=1 make run DAY=07`.
RUN_DEVICE ?= cpu
run: setup
	@test -n "$(DAY_ID)" || { echo "make run needs DAY=NN"; exit 2; }
	$(CHECK_DAY)
	@mkdir -p build/runs/$(DAY_ID)
	@TIMEFORMAT="$(DAY_ID): %R s wall, %U s user + %S s sys of CPU on $(RUN_DEVICE) (output: build/runs/$(DAY_ID)/)"; \
		time $(BIN)/papermill solutions/$(DAY_ID)/*.ipynb build/runs/$(DAY_ID)/$(DAY_ID).ipynb \
		-p DEVICE $(RUN_DEVICE) $(if $(SMOKE),-p SMOKE True) --cwd build/runs/$(DAY_ID) --no-progress-bar

## Regenerate the learner notebooks in days/ from solutions/ (never edit days/ by hand); DAY=NN for one day.
days: setup
	$(if $(DAY_ID),$(CHECK_DAY))
	$(BIN)/python tools/generate_days.py $(DAY_ID)

## Once per clone, for authors: notebooks diff as text (tools/nbtext.py, each hunk names its cell), and a pre-commit
## hook refuses notebooks with outputs (tools/githooks/pre-commit).
hooks:
	git config diff.notebook.textconv "$(PYTHON) tools/nbtext.py"
	git config diff.notebook.xfuncname '^# %%.*$$'
	git config core.hooksPath tools/githooks

audit:
	$(PYTHON) ../shared/tools/course_audit.py --existing --strict

clean-venv:
	rm -rf $(VENV)

## Rehearse the GPU check kit on the GPU machine's software (Python 3.12, torch 2.11, only the carried wheels), on
## this CPU: a separate environment in ~/.cache (several GB, once), the kit's dry run and every notebook (slow).
.PHONY: gpu-rehearsal
gpu-rehearsal:
	nice -n 10 $(PYTHON) tools/gpu_rehearsal.py $(REHEARSAL_ARGS)

## The proxy of the course's JupyterHub (hub/README.md), from npm into build/hub-proxy: tests/test_hub.py and
## `COURSE_HUB_SPAWNER=local jupyterhub -f hub/jupyterhub_config.py` use it. Needs Node.js 20 or newer and npm.
HUB_PROXY := build/hub-proxy/node_modules/.bin/configurable-http-proxy
.PHONY: hub-proxy
hub-proxy: $(HUB_PROXY)

$(HUB_PROXY): hub/package.json hub/package-lock.json
	mkdir -p build/hub-proxy && cp hub/package.json hub/package-lock.json build/hub-proxy/
	cd build/hub-proxy && npm ci --no-audit --no-fund --loglevel=error
	touch $@
