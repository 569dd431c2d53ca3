"""What a learner gets from `make lab`: their own workspace, JupyterLab opening Day 01's notebook in it, no
instructor panels, no Extension Manager and no news prompt, kernels on local sockets (no "running over TCP without
encryption" warning), nbgrader's Validate button with the course's cell timeout wherever the lab was started and
with a count of what passes.

The lab test runs the Makefile's own `lab` recipe (setup skipped with `make -o`) against an empty Jupyter
configuration in a temporary HOME and a temporary workspace, as on a learner's first start.
"""
from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

VENV = Path(sys.prefix)
TOKEN = "learner-lab-test"
INSTRUCTOR_PLUGINS = {"create-assignment", "formgrader", "course-list", "assignment-list", "menu"}


def fresh_jupyter_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
    env.update(HOME=str(home), JUPYTER_CONFIG_DIR=str(home / ".jupyter"), JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), JUPYTER_PLATFORM_DIRS="0")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str) -> tuple:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers={"Authorization": f"token {TOKEN}"})
    resp = conn.getresponse()
    return resp.status, resp.getheader("Location"), resp.read().decode()


def nbgrader_plugin_ids() -> set:
    """The plugin ids named in the installed nbgrader lab extension's code."""
    static = VENV / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader" / "static"
    return {m for f in static.glob("*.js") for m in re.findall(r'"@jupyter/nbgrader:([a-z-]+)"', f.read_text())}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    port = free_port()
    lab_args = f"--no-browser --port={port} --ServerApp.port_retries=0 --IdentityProvider.token={TOKEN}"
    cmd = ["make", "--no-print-directory", f"VENV={VENV}", "-o", f"{VENV}/.installed", "-o", f"{VENV}/.torch-build",
           "lab", f"LAB_ARGS={lab_args}", f"WORKSPACE={home / 'workspace'}"]
    log = open(home / "lab.log", "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=fresh_jupyter_env(home), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"make lab exited ({proc.returncode}):\n{(home / 'lab.log').read_text()[-3000:]}")
            try:
                if get(port, "/api/status")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer in 180 s:\n{(home / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield port, home
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.mark.slow
def test_make_lab_opens_day01_in_the_learners_own_workspace(lab):
    port, home = lab
    status, location, _ = get(port, "/")
    assert status in (301, 302), status
    path = location.split("?")[0].split("/lab/tree/", 1)[1]
    assert path.startswith("day01/") and path.endswith(".ipynb"), f"/ redirects to {location}, not Day 01's notebook"
    opened = home / "workspace" / path
    assert opened.is_file(), "the lab opens the workspace copy"
    assert opened.read_bytes() == (ROOT / "days" / path).read_bytes(), "a fresh workspace copy is the release"
    assert "your work lives in" in (home / "lab.log").read_text()


@pytest.mark.slow
def test_learners_see_no_instructor_panels_but_keep_validate(lab):
    port, home = lab
    status, _, page = get(port, "/lab/tree/day01")
    assert status == 200
    config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                  page, re.S).group(1))
    disabled = {d.removeprefix("@jupyter/nbgrader:") for d in config["disabledExtensions"] if "nbgrader" in d}
    assert disabled == INSTRUCTOR_PLUGINS
    assert "@jupyterlab/extensionmanager-extension" in config["disabledExtensions"], "the Extension Manager shows"
    assert INSTRUCTOR_PLUGINS | {"validate-assignment"} <= nbgrader_plugin_ids(), "a plugin id is misspelt"
    assert "@jupyter/nbgrader" in {e["name"] for e in config["federated_extensions"]}
    import nbgrader
    assert get(port, "/formgrader")[0] == 404                                   # server side: formgrader off
    assert get(port, f"/nbgrader_version?version={nbgrader.__version__}")[0] == 200   # the Validate button's server
    assert "course_lab: the Validate button reports a count" in (home / "lab.log").read_text()


@pytest.mark.slow
def test_kernels_use_local_sockets(lab):
    port, home = lab
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/api/kernels", body=json.dumps({"name": "python3"}),
                 headers={"Authorization": f"token {TOKEN}"})
    kernel = json.loads(conn.getresponse().read())
    runtime = home / "runtime"
    deadline = time.monotonic() + 60
    while not list(runtime.glob(f"kernel-{kernel['id']}*.json")) and time.monotonic() < deadline:
        time.sleep(0.5)
    info = json.loads(next(runtime.glob(f"kernel-{kernel['id']}*.json")).read_text())
    assert info["transport"] == "ipc", "a TCP kernel logs 'running over TCP without encryption' on every start"


@pytest.mark.slow
def test_no_news_prompt(lab):
    status, _, body = get(lab[0], "/lab/api/settings/@jupyterlab/apputils-extension:notification")
    assert status == 200
    # "none" would ask "Would you like to get notified about official Jupyter news?" on the first start
    assert json.loads(body)["schema"]["properties"]["fetchNews"]["default"] == "false"


LOAD_VALIDATE_CONFIG = """
from nbgrader.server_extensions.validate_assignment.handlers import ValidateAssignmentHandler
print(ValidateAssignmentHandler.load_config(None).Execute.timeout)   # the Validate button's own config loading
"""


def validate_timeout(cwd: Path, home: Path, **env_extra: str):
    env = {**fresh_jupyter_env(home), **env_extra}
    out = subprocess.run([sys.executable, "-c", LOAD_VALIDATE_CONFIG], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    value = out.stdout.strip().splitlines()[-1]
    return None if value.startswith("<") else float(value)    # a LazyConfigValue/empty Config: not set


@pytest.mark.slow
def test_validate_uses_the_course_timeout_from_any_folder(tmp_path):
    course = validate_timeout(ROOT, tmp_path)
    assert course is not None and course > 30, "nbgrader_config.py should raise nbgrader's 30 s default"
    elsewhere = tmp_path / "days-copy"
    elsewhere.mkdir()
    assert validate_timeout(elsewhere, tmp_path) == course, \
        f"{VENV}/etc/jupyter/nbgrader_config.py is missing or stale: run `make setup`"
    assert validate_timeout(elsewhere, tmp_path, JUPYTER_CONFIG_PATH=str(ROOT / ".jupyter")) == course
