"""The course's JupyterHub (hub/jupyterhub_config.py) serves a class: started for real on 127.0.0.1 with its local
process spawner and configurable-http-proxy (`make hub-proxy`), a student and an instructor log in over HTTP and get
servers. The student sees the course and the day the instructor released through nbgrader's exchange, and no
instructor tools; the instructor's formgrader lists that day. Every process the hub started is gone afterwards.
The production settings (DockerSpawner, limits, GPUs) are checked against docker-py.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import runpy
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

HUB = ROOT / "hub"
PROXY = ROOT / "build" / "hub-proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
STUDENT_PASSWORD = "a-class-password"
INSTRUCTOR_PASSWORD = "an-instructor-password-of-32-characters"
DAY = "day26"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_hub_config(tmp_path: Path, **env: str):
    """hub/jupyterhub_config.py's settings, loaded as JupyterHub loads it, with ``env`` in the environment."""
    from traitlets.config import Config

    roster = tmp_path / "roster.txt"
    roster.write_text("alice\nbob\ninstructor:teacher\n")
    old = dict(os.environ)
    os.environ.update({"COURSE_HUB_DATA": str(tmp_path / "data"), "COURSE_ROSTER": str(roster)})
    os.environ.update(env)
    try:
        c = Config()
        runpy.run_path(str(HUB / "jupyterhub_config.py"), init_globals={"get_config": lambda: c})
        return c
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_production_config_gives_each_user_a_limited_gpu_container(tmp_path: Path):
    docker = pytest.importorskip("docker")
    c = load_hub_config(tmp_path)
    assert c.JupyterHub.spawner_class == "dockerspawner.DockerSpawner"
    assert c.Authenticator.allowed_users == {"alice", "bob", "teacher"} and c.Authenticator.admin_users == {"teacher"}
    assert c.JupyterHub.load_groups["formgrade-gpu-bootcamp"]["users"] == ["teacher"]
    # what DockerSpawner hands to docker-py: limits and GPU requests it accepts (API 1.40+ has device requests)
    host = docker.types.HostConfig(version="1.43", mem_limit=c.Spawner.mem_limit, cpu_period=100_000,
                                   cpu_quota=int(c.Spawner.cpu_limit * 100_000), **c.DockerSpawner.extra_host_config)
    assert host["Memory"] == 16 * 1024 ** 3 and host["CpuQuota"] / host["CpuPeriod"] == 4
    assert host["DeviceRequests"][0]["Count"] == -1 and host["DeviceRequests"][0]["Capabilities"] == [["gpu"]]
    pinned = load_hub_config(tmp_path, COURSE_GPUS="1")
    request = docker.types.HostConfig(version="1.43", **pinned.DockerSpawner.extra_host_config)["DeviceRequests"][0]
    assert request["DeviceIDs"] == ["1"] and request["Count"] == 0
    # the exchange and each student's days/ are volumes, mounted where hub/jupyter/nbgrader_config.py expects them
    volumes = c.DockerSpawner.volumes
    assert volumes["gpu-bootcamp-exchange"] == "/srv/nbgrader/exchange"
    assert volumes["gpu-bootcamp-{username}-days"] == "/home/learner/course/days"
    # one copy of the datasets for the class, where utils.datasets looks (not in a container removed at logout)
    assert volumes["gpu-bootcamp-data"] == "/srv/bootcamp-data"
    from types import SimpleNamespace

    from utils.datasets import DATA_ENV_VAR
    student = SimpleNamespace(user=SimpleNamespace(name="alice"), environment={}, volumes=dict(volumes))
    asyncio.run(c.Spawner.pre_spawn_hook(student))
    assert student.environment[DATA_ENV_VAR] == "/srv/bootcamp-data"
    dockerfile = (HUB / "Dockerfile").read_text()
    assert "/etc/jupyter/course-hub" in dockerfile and "/srv/nbgrader/exchange" in dockerfile
    assert "chmod 0777 /srv/nbgrader/exchange /srv/bootcamp-data" in dockerfile
    # the instructor's server grades in the same image: the instructor package is in it, installed (editable) after
    # it is copied, and the learner image's unkept workspace/ is gone (a student works in the kept days/)
    copy_instructor = dockerfile.index("COPY --chown=learner:learner instructor ")
    assert dockerfile.index("-e /home/learner/course", copy_instructor) < dockerfile.index("USER learner")
    assert "rmdir /home/learner/course/workspace" in dockerfile
    # the formgrader reads the nbgrader_config.py of its working folder (the image's WORKDIR) after the hub's: the
    # repository's authoring config, whose course root is that folder, must not be there to override the hub's
    course_image = [line.split()[1:] for line in (ROOT / "Dockerfile").read_text().splitlines()
                    if line.startswith("COPY ")]
    assert not any("nbgrader_config.py" in words[:-1] for words in course_image)


def test_local_trial_starts_the_hubs_own_single_user_server_whatever_the_path(tmp_path: Path):
    c = load_hub_config(tmp_path, COURSE_HUB_SPAWNER="local", COURSE_HUB_PASSWORD=STUDENT_PASSWORD,
                        COURSE_HUB_ADMIN_PASSWORD=INSTRUCTOR_PASSWORD)
    (command,) = c.Spawner.cmd
    assert Path(command).is_absolute() and Path(command).parent == Path(sys.executable).parent
    assert Path(command).name == "jupyterhub-singleuser" and Path(command).exists()


def test_roster_without_an_instructor_is_refused(tmp_path: Path):
    roster = tmp_path / "students-only.txt"
    roster.write_text("alice\n")
    with pytest.raises(ValueError, match="names no instructor"):
        load_hub_config(tmp_path, COURSE_ROSTER=str(roster))


def _release_day(home: Path, exchange: Path) -> None:
    """The instructor guide's release block, run as the instructor ``teacher`` whose hub home is ``home``."""
    from test_exchange import guide_block

    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "NBGRADER", "COURSE"))}
    env.update(REPO=str(ROOT), DAY=DAY, HOME=str(home), COURSE_ROLE="instructor", NBGRADER_EXCHANGE=str(exchange),
               COURSE_GRADING_DIR=str(home / "grading" / "gpu-bootcamp"),
               JUPYTER_CONFIG_PATH=f"{HUB / 'jupyter' / 'instructor'}{os.pathsep}{HUB / 'jupyter'}")
    result = subprocess.run(["bash", "-c", guide_block("instructor: release a day")], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]


def _stop(hub: subprocess.Popen, log) -> list[int]:
    """Stop the hub as an admin would (SIGTERM: it stops the user servers and the proxy), then anything it left."""
    import psutil

    started = [p for p in psutil.Process(hub.pid).children(recursive=True)] if hub.poll() is None else []
    hub.send_signal(signal.SIGTERM)
    try:
        hub.wait(timeout=30)
    except subprocess.TimeoutExpired:
        hub.kill()
        hub.wait(timeout=10)
    gone, alive = psutil.wait_procs(started, timeout=10)
    for p in alive:  # processes this test started (the hub's children), by pid
        p.kill()
    log.close()
    return [p.pid for p in alive]


def _log_in(base: str, user: str, password: str):
    """A browser's session: the hub's login form (with its XSRF token), which then starts the user's server."""
    import requests

    session = requests.Session()
    session.get(f"{base}/hub/login", timeout=30)
    r = session.post(f"{base}/hub/login?next=/hub/spawn", timeout=60,
                     data={"username": user, "password": password, "_xsrf": session.cookies.get("_xsrf")})
    return session, r


def _wait_ready(session, base: str, user: str, log: Path) -> None:
    deadline = time.monotonic() + 120
    while not session.get(f"{base}/hub/api/users/{user}", timeout=10).json()["servers"].get("", {}).get("ready"):
        assert time.monotonic() < deadline, f"{user}'s server did not start:\n" + log.read_text()[-4000:]
        time.sleep(0.5)


@pytest.mark.slow
def test_student_and_instructor_log_in_and_find_the_released_day(tmp_path: Path):
    import requests

    if not PROXY.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{PROXY} is missing: .ci/run installs it with `make hub-proxy`")
        pytest.skip("configurable-http-proxy is not installed: `make hub-proxy` (needs npm)")
    start = time.perf_counter()
    data = tmp_path / "data"
    (data / "exchange").mkdir(parents=True)
    (data / "exchange").chmod(0o777)  # what the local spawner's hook would do on the first spawn
    _release_day(data / "home" / "teacher", data / "exchange")
    phases = {"release": time.perf_counter() - start}
    roster = tmp_path / "roster.txt"
    roster.write_text("alice\ninstructor:teacher\n")
    port, hub_port, api_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "NBGRADER", "COURSE"))}
    env.update(COURSE_HUB_SPAWNER="local", COURSE_HUB_DATA=str(data), COURSE_ROSTER=str(roster),
               COURSE_HUB_PASSWORD=STUDENT_PASSWORD, COURSE_HUB_ADMIN_PASSWORD=INSTRUCTOR_PASSWORD,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}")
    log_path = tmp_path / "hub.log"
    log = open(log_path, "w")
    hub = subprocess.Popen(
        [sys.executable, "-m", "jupyterhub", "-f", str(HUB / "jupyterhub_config.py"), "--ip=127.0.0.1",
         f"--port={port}", f"--JupyterHub.hub_port={hub_port}",
         f"--ConfigurableHTTPProxy.api_url=http://127.0.0.1:{api_port}"],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # the hub is up when its login page answers through the proxy
            try:
                if requests.get(f"{base}/hub/login", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert hub.poll() is None and time.monotonic() < deadline, log_path.read_text()[-4000:]
            time.sleep(0.5)
        phases["hub up"] = time.perf_counter() - start - sum(phases.values())
        assert _log_in(base, "alice", "wrong-password")[1].status_code == 403, "a wrong password must not log in"
        assert _log_in(base, "teacher", STUDENT_PASSWORD)[1].status_code == 403, "instructors need their password"
        # both servers start at once
        (s, r), (t, rt) = _log_in(base, "alice", STUDENT_PASSWORD), _log_in(base, "teacher", INSTRUCTOR_PASSWORD)
        for user, response in (("alice", r), ("teacher", rt)):
            assert response.status_code == 200 and f"/{user}" in response.url, (user, response.url)
        _wait_ready(s, base, "alice", log_path)
        _wait_ready(t, base, "teacher", log_path)
        lab = s.get(f"{base}/user/alice/lab", timeout=60)  # as a browser: the server's OAuth login with the hub
        assert t.get(f"{base}/user/teacher/lab", timeout=60).status_code == 200
        phases["log-ins and spawns"] = time.perf_counter() - start - sum(phases.values())
        assert lab.status_code == 200 and lab.url.startswith(f"{base}/user/alice/"), lab.url

        # the student: the learner copy of every day, where the course image puts it
        days = s.get(f"{base}/user/alice/api/contents/days", timeout=30).json()
        assert {"day01", DAY} <= {item["name"] for item in days["content"]}
        # nbgrader's Assignment List: the day the instructor released, already in days/ (so: fetched)
        listing = s.get(f"{base}/user/alice/assignments", params={"course_id": "gpu-bootcamp"}, timeout=60).json()
        assert listing["success"], listing
        (released,) = [a for a in listing["value"] if a["assignment_id"] == DAY]
        assert released["status"] == "fetched" and released["path"] == f"days/{DAY}", released
        # a student's server has no instructor tools
        assert s.get(f"{base}/user/alice/formgrader", timeout=30).status_code == 404
        page = json.loads(re.search(r'id="jupyter-config-data" type="application/json">(.*?)</script>', lab.text,
                                    re.S).group(1))
        disabled = page["disabledExtensions"]
        disabled = set(disabled) if isinstance(disabled, list) else {k for k, v in disabled.items() if v}
        assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment"} <= disabled
        assert "@jupyter/nbgrader:assignment-list" not in disabled
        # the instructor: the formgrader on their own server, grading the course folder the day was released from
        grader = t.get(f"{base}/user/teacher/formgrader/api/assignments", timeout=60)
        assert grader.status_code == 200, grader.text[:500]
        assert DAY in {a["name"] for a in grader.json()}, grader.text[:500]
        phases["checks"] = time.perf_counter() - start - sum(phases.values())
    finally:
        leftovers = _stop(hub, log)
    phases["stop"] = time.perf_counter() - start - sum(phases.values())
    print("hub test: " + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()))
    assert not leftovers, f"the hub left processes running: {leftovers}"
    with socket.socket() as probe:  # the public port is closed again
        assert probe.connect_ex(("127.0.0.1", port)) != 0
