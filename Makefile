# One command to set up and start the course, one to set up and test it. See README.md.
# Setup is idempotent: the virtual environment is rebuilt only when the lock file or pyproject.toml change.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
# Some machines' pip config lists local package indexes that do not exist; pip then warns once per package.
QUIET_PIP := 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Tests use both cores; each notebook kernel gets one thread so two kernels do not fight over two cores.
PYTEST_WORKERS ?= 2

.PHONY: setup lab test test-fast days audit clean-venv

setup: $(STAMP)

$(STAMP): requirements-lock.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python 3.10+ is needed, found " + sys.version.split()[0]'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-lock.txt $(QUIET_PIP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e . $(QUIET_PIP)
	$(BIN)/python -c 'import torch, torchvision, nbgrader, papermill, utils; print("setup ok: torch", torch.__version__, "| utils from", utils.__file__)'
	touch $(STAMP)

## The main command: set everything up and open the course in JupyterLab (offline, on the bundled dataset).
# --allow-root only where the shell really is root (containers, CI); learners run as themselves.
lab: setup
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" --ServerApp.default_url=/lab/tree/days/day01 \
		$(if $(filter 0,$(shell id -u)),--allow-root,) $(LAB_ARGS)

## The test command (.ci/run calls exactly this): set everything up and run the whole suite.
test: setup
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --timeout 900

## Unit tests only (no notebook execution), for quick iteration on utils.
test-fast: setup
	$(BIN)/python -m pytest -m "not notebooks"

## Regenerate the learner notebooks in days/ from solutions/ (never edit days/ by hand).
days: setup
	$(BIN)/python tools/generate_days.py

audit:
	$(PYTHON) ../shared/tools/course_audit.py --existing --strict

clean-venv:
	rm -rf $(VENV)
