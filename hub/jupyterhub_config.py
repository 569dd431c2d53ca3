"""JupyterHub for a class: every user gets the course in a server of their own, with nbgrader's exchange between them.

Production, on one GPU machine with Docker (hub/README.md has every step):

    docker build -t gpu-bootcamp . && docker build -t gpu-bootcamp-hub -f hub/Dockerfile .
    sudo COURSE_ROSTER=/srv/jupyterhub/roster.txt .venv/bin/jupyterhub -f hub/jupyterhub_config.py

A trial on one machine without Docker (what tests/test_hub.py starts; every user runs as the hub's own Unix user,
with no isolation between them, so never for a real class):

    COURSE_HUB_SPAWNER=local COURSE_HUB_DATA=/tmp/hub COURSE_HUB_PASSWORD=... \
        jupyterhub -f hub/jupyterhub_config.py --ip 127.0.0.1

Environment: COURSE_ROSTER (a file, one user name per line, ``instructor:`` before instructors' names),
COURSE_HUB_SPAWNER (``docker`` or ``local``), COURSE_HUB_DATA (the hub's database, cookie secret, and in local
mode the users' homes and the exchange), COURSE_IMAGE, COURSE_MEM_LIMIT, COURSE_CPU_LIMIT, COURSE_GPUS,
COURSE_HUB_BRIDGE_IP (where containers reach the hub: the Docker bridge's address on the host),
COURSE_HUB_PASSWORD and COURSE_HUB_ADMIN_PASSWORD (local mode only: the students' and the instructors' shared
passwords), COURSE_HUB_PROXY (the configurable-http-proxy command).
"""
import os
import shutil
import sys
from pathlib import Path

c = get_config()  # noqa: F821  (provided by JupyterHub)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
COURSE_ID = "gpu-bootcamp"  # the same as hub/jupyter/nbgrader_config.py and the repository's nbgrader_config.py
SPAWNER = os.environ.get("COURSE_HUB_SPAWNER", "docker")
DATA = Path(os.environ.get("COURSE_HUB_DATA", "/srv/jupyterhub"))
if SPAWNER not in ("docker", "local"):
    raise ValueError(f"COURSE_HUB_SPAWNER={SPAWNER!r}: use 'docker' (a class) or 'local' (a trial on one machine)")


def read_roster(path: str) -> tuple:
    """(students, instructors) from a roster file: one user name per line, ``instructor:NAME`` for instructors."""
    students, instructors = set(), set()
    for line in Path(path).read_text().splitlines():
        name = line.split("#")[0].strip()
        if name.startswith("instructor:"):
            instructors.add(name.split(":", 1)[1].strip())
        elif name:
            students.add(name)
    if not instructors:
        raise ValueError(f"{path} names no instructor: add a line 'instructor:NAME'")
    return students, instructors


STUDENTS, INSTRUCTORS = read_roster(os.environ.get("COURSE_ROSTER", str(DATA / "roster.txt")))

# ------------------------------------------------------------------------------------------------ the hub itself
DATA.mkdir(parents=True, exist_ok=True)
c.JupyterHub.db_url = f"sqlite:///{DATA / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(DATA / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(DATA / "jupyterhub-proxy.pid")
_local_proxy = REPO / "build" / "hub-proxy" / "node_modules" / ".bin" / "configurable-http-proxy"  # make hub-proxy
c.ConfigurableHTTPProxy.command = [os.environ.get(
    "COURSE_HUB_PROXY", str(_local_proxy) if _local_proxy.exists() else "configurable-http-proxy")]

c.Authenticator.allowed_users = STUDENTS | INSTRUCTORS
c.Authenticator.admin_users = INSTRUCTORS
# nbgrader's group names: formgrade-<course> for instructors and graders, nbgrader-<course> for students.
c.JupyterHub.load_groups = {f"formgrade-{COURSE_ID}": {"users": sorted(INSTRUCTORS)},
                            f"nbgrader-{COURSE_ID}": {"users": sorted(STUDENTS)}}

# ------------------------------------------------------------------------------------------------ every server
# Resource limits per user server: a GPU course needs RAM for data loaders and pinned memory, and a few cores for
# loader workers. DockerSpawner enforces both (cgroups); the local trial spawner enforces neither.
c.Spawner.mem_limit = os.environ.get("COURSE_MEM_LIMIT", "16G")
c.Spawner.cpu_limit = float(os.environ.get("COURSE_CPU_LIMIT", "4"))
c.Spawner.default_url = "/lab/tree/days/day01"
c.Spawner.http_timeout = 120   # a cold JupyterLab with the course's extensions can take a minute on a busy machine
c.Spawner.start_timeout = 300  # the first pull of the course image takes minutes
c.JupyterHub.shutdown_on_logout = True
# Paths as the user's server sees them (inside the container in docker mode).
CONFIG_DIR = "/etc/jupyter/course-hub" if SPAWNER == "docker" else str(HERE / "jupyter")
EXCHANGE = "/srv/nbgrader/exchange" if SPAWNER == "docker" else str(DATA / "exchange")
# Datasets (utils.datasets reads BOOTCAMP_DATA): one copy for the class, which the instructor downloads once.
DATASETS = "/srv/bootcamp-data" if SPAWNER == "docker" else str(DATA / "data")


def role(spawner) -> str:
    return "instructor" if spawner.user.name in INSTRUCTORS else "student"


def set_server_root(spawner, home: str) -> None:
    """Students' servers open in ``home/course``; instructors' in ``home``, with ``course/`` and ``grading/`` side by
    side: nbgrader's formgrader refuses a course folder outside the server's root ("not a subdirectory")."""
    if role(spawner) == "instructor":
        spawner.notebook_dir, spawner.default_url = home, "/lab/tree/course/days/day01"
    else:
        spawner.notebook_dir = f"{home}/course"


def course_environment(spawner, home: str) -> dict:
    """The environment that makes nbgrader and JupyterLab see the class: hub/jupyter/nbgrader_config.py reads it."""
    who, course_dir = role(spawner), f"{home}/course"
    env = {} if who == "student" else {"COURSE_GRADING_DIR": f"{home}/grading/{COURSE_ID}"}
    return env | {
        "COURSE_ROLE": who,
        "NBGRADER_EXCHANGE": EXCHANGE,
        "BOOTCAMP_DATA": DATASETS,
        "COURSE_DAYS_DIR": f"{course_dir}/days",
        # the role's settings (nbgrader panels) first, then the class-wide nbgrader config, then the course's own
        # learner settings (.jupyter: opens days/day01, no news prompt)
        "JUPYTER_CONFIG_PATH": os.pathsep.join([f"{CONFIG_DIR}/{who}", CONFIG_DIR, f"{course_dir}/.jupyter"]),
    }


if SPAWNER == "docker":
    # The course image (Dockerfile) plus hub/Dockerfile: jupyterhub-singleuser instead of a bare JupyterLab.
    c.JupyterHub.spawner_class = "dockerspawner.DockerSpawner"
    c.DockerSpawner.image = os.environ.get("COURSE_IMAGE", "gpu-bootcamp-hub")
    c.DockerSpawner.remove = True  # a stopped server's container goes; its volumes stay
    c.DockerSpawner.volumes = {
        # A student's days/ (their work) outlives the container. Docker fills a new named volume from the image, so
        # each student starts with the image's days/; utils/ and the rest stay the image's and update with it.
        "gpu-bootcamp-{username}-days": "/home/learner/course/days",
        # nbgrader's exchange, shared by every server. hub/Dockerfile creates the folder writable by all, and Docker
        # copies those permissions into the volume when it is first created.
        "gpu-bootcamp-exchange": EXCHANGE,
        # The datasets, shared by every server the same way: without it each server downloads Imagenette into a
        # container that is removed when the server stops.
        "gpu-bootcamp-data": DATASETS,
    }
    # The containers reach the hub on the Docker bridge; the proxy reaches them on 127.0.0.1 (published ports).
    c.JupyterHub.hub_ip = os.environ.get("COURSE_HUB_BRIDGE_IP", "172.17.0.1")
    # GPUs: every container sees the machine's GPUs ("all"), or COURSE_GPUS="0" / "0,1" for a fixed set.
    _gpus = os.environ.get("COURSE_GPUS", "all")
    c.DockerSpawner.extra_host_config = {"device_requests": [
        {"Driver": "nvidia", "Count": -1, "Capabilities": [["gpu"]]} if _gpus == "all" else
        {"Driver": "nvidia", "DeviceIDs": _gpus.split(","), "Capabilities": [["gpu"]]}]}

    async def docker_pre_spawn(spawner):
        # a new dict: the configured one is shared by every spawner
        spawner.environment = {**spawner.environment, **course_environment(spawner, "/home/learner")}
        set_server_root(spawner, "/home/learner")
        if role(spawner) == "instructor":
            # the grading folder (gradebook, submissions, feedback) lives in a volume of its own
            spawner.volumes = dict(spawner.volumes, **{"gpu-bootcamp-grading-{username}": "/home/learner/grading"})

    c.Spawner.pre_spawn_hook = docker_pre_spawn
else:
    # Trial mode: one local process per user, all as the hub's Unix user; each gets a home under COURSE_HUB_DATA.
    c.JupyterHub.spawner_class = "jupyterhub.spawner.SimpleLocalProcessSpawner"
    c.SimpleLocalProcessSpawner.home_dir_template = str(DATA / "home" / "{username}")
    # One shared password for students (8+ characters) and one for instructors (32+), never a password-less hub.
    c.JupyterHub.authenticator_class = "shared-password"
    c.SharedPasswordAuthenticator.user_password = os.environ["COURSE_HUB_PASSWORD"]
    c.SharedPasswordAuthenticator.admin_password = os.environ.get("COURSE_HUB_ADMIN_PASSWORD")
    # The hub's own environment's server, by path: started from a shell without the venv, PATH would not find it.
    c.Spawner.cmd = [str(Path(sys.executable).with_name("jupyterhub-singleuser"))]
    if os.geteuid() == 0:  # containers and CI run as root; jupyter refuses to without this flag
        c.Spawner.args = ["--allow-root"]

    def local_pre_spawn(spawner):
        # What the course image and its days/ volume give a container: a copy of the course's learner files.
        course = Path(spawner.home_dir) / "course"
        if not (course / "days").exists():
            course.mkdir(parents=True, exist_ok=True)
            shutil.copytree(REPO / "days", course / "days", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
            shutil.copytree(REPO / ".jupyter", course / ".jupyter")
        for shared in (Path(EXCHANGE), Path(DATASETS)):
            if not shared.exists():
                shared.mkdir(parents=True)
                shared.chmod(0o777)
        set_server_root(spawner, spawner.home_dir)
        # a new dict: the configured one is shared by every spawner
        spawner.environment = {**spawner.environment, **course_environment(spawner, spawner.home_dir)}

    c.Spawner.pre_spawn_hook = local_pre_spawn
