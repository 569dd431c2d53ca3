# GPU users: a container with the course, JupyterLab as the entrypoint.
#   docker build -t gpu-bootcamp .
#   docker run --gpus all -p 8888:8888 gpu-bootcamp
# `--gpus all` needs the NVIDIA Container Toolkit on the host (Day 01 explains why). The PyTorch wheel brings its own
# CUDA runtime and cuDNN; the base image only adds the CUDA user-space that matches the host driver.
FROM nvidia/cuda:13.0.1-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev build-essential make git \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --shell /bin/bash learner

WORKDIR /home/learner/course

# Dependencies first (cached layer), from the same lock file as setup, CI and conda.
COPY requirements-lock.txt pyproject.toml README.md ./
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/python -m pip install -r requirements-lock.txt

COPY utils ./utils
RUN /opt/venv/bin/python -m pip install --no-deps --no-build-isolation -e .

COPY nbgrader_config.py Makefile ./
COPY days ./days
COPY results ./results
COPY docs ./docs
RUN chown -R learner:learner /home/learner/course

USER learner
EXPOSE 8888
ENTRYPOINT ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", "--ServerApp.root_dir=/home/learner/course", \
            "--ServerApp.default_url=/lab/tree/days/day01"]
