# GPU users: a container with the course, JupyterLab as the entrypoint.
#   docker build -t gpu-bootcamp .                            # the lock's CUDA 13.0 build: NVIDIA driver 580 or newer
#   docker build --build-arg TORCH=cu126 -t gpu-bootcamp .    # CUDA 12 drivers (525-579) with a GPU up to Hopper, and
#                                                             # GPUs older than Turing (a Blackwell GPU needs 580+)
#   docker build --build-arg TORCH=cpu -t gpu-bootcamp .      # no NVIDIA GPU (also Intel Macs): about 4 GB smaller
#                                                             # (run that image without `--gpus all`)
#   docker run --gpus all -p 8888:8888 -v bootcamp-work:/home/learner/course/workspace gpu-bootcamp
# `--gpus all` needs the NVIDIA Container Toolkit on the host (Day 01 explains why). The PyTorch wheel brings its own
# CUDA runtime and cuDNN, so the base is plain Ubuntu: the toolkit mounts the host's driver into the container, and no
# CUDA base image ties the container to a minimum driver version.
FROM ubuntu:24.04

ARG TORCH=default
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    JUPYTER_CONFIG_PATH=/home/learner/course/.jupyter

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev build-essential make git \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --shell /bin/bash learner

WORKDIR /home/learner/course

# Dependencies first (a cached layer): the same lock file and the same build choice as `make setup`.
COPY requirements-lock.txt pyproject.toml README.md ./
COPY tools/torch_build.py tools/pip_progress.py ./tools/
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/python tools/torch_build.py choose --torch "$TORCH" --venv /opt/venv \
        --write /opt/venv/.torch-build \
    && /opt/venv/bin/python tools/torch_build.py install --choice /opt/venv/.torch-build

COPY utils ./utils
COPY course_lab ./course_lab
RUN /opt/venv/bin/python -m pip install --no-deps --no-build-isolation -e .

# The learner's lab settings (what `make lab` uses): open Day 01's notebook, no instructor panels, the course's
# timeout for nbgrader's Validate button from any folder.
COPY .jupyter ./.jupyter
RUN mkdir -p /opt/venv/etc/jupyter && cp .jupyter/nbgrader_config.py /opt/venv/etc/jupyter/nbgrader_config.py

COPY Makefile ./
COPY days ./days
COPY results ./results
COPY tools/workspace.py ./tools/
RUN mkdir workspace && chown -R learner:learner /home/learner/course

# Your work lives in workspace/, as with `make lab`. Mount a named volume there (README: `-v bootcamp-work:...`) and
# it outlives the container: each start copies new days in and carries your answers into days the course updated
# (tools/workspace.py), so a rebuilt image brings course updates without losing work.
USER learner
EXPOSE 8888
ENTRYPOINT ["/bin/sh", "-c", "python tools/workspace.py sync --days days --workspace workspace && exec jupyter lab \
--ip=0.0.0.0 --port=8888 --no-browser --ServerApp.root_dir=/home/learner/course/workspace \
--LabApp.default_url=/lab/tree/day01/day01_environment_check.ipynb \"$@\"", "--"]
