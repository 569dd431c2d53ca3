"""Day 01: correct answers to choose_device, gpus_seen_with, parse_torch_version and runs_on, written other ways."""
from grader_alternatives import Alternative

ALTERNATIVES = [
    # --- Exercise 1: choose_device
    Alternative(cell="day01_choose_device",
                why="a dict of lazy probes and a startswith chain; each probe still asked only when it decides",
                source='''from typing import Callable


def choose_device(preference: str, cuda_available: Callable[[], bool], mps_available: Callable[[], bool]) -> str:
    wanted = preference.lower().strip()
    probes = {"cuda": cuda_available, "mps": mps_available}
    if wanted == "cpu":
        return wanted
    if wanted == "auto":
        for name in ("cuda", "mps"):
            if probes[name]():
                return name
        return "cpu"
    family = wanted.split(":", 1)[0]
    if family not in probes or (wanted not in probes and not (family == "cuda" and wanted[5:].isdigit())):
        raise RuntimeError(f"unknown device {preference!r}: try 'auto'")
    if not probes[family]():
        raise RuntimeError(f"{preference!r} is not available here; use 'auto' to fall back")
    return wanted
'''),
    Alternative(cell="day01_choose_device",
                why="match/case on the normalised string, with a guard for cuda:N",
                source='''from typing import Callable


def choose_device(preference: str, cuda_available: Callable[[], bool], mps_available: Callable[[], bool]) -> str:
    pref = preference.strip().lower()
    match pref:
        case "cpu":
            return "cpu"
        case "auto":
            return "cuda" if cuda_available() else ("mps" if mps_available() else "cpu")
        case "mps":
            if mps_available():
                return "mps"
            raise RuntimeError("no MPS here: use 'auto'")
        case _ if pref == "cuda" or (pref.startswith("cuda:") and pref[5:].isdigit()):
            if cuda_available():
                return pref
            raise RuntimeError("no CUDA here: use 'auto'")
        case _:
            raise RuntimeError(f"what device is {preference!r}? use 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'")
'''),
    # --- Exercise 2: gpus_seen_with
    Alternative(cell="day01_gpus_seen_with",
                why="os.environ.copy() and a dict comprehension to drop the variable; check_output with its "
                    "CalledProcessError turned into RuntimeError",
                source='''def gpus_seen_with(value: str | None, python: str = sys.executable, timeout_s: float = 120.0) -> int:
    env = {k: v for k, v in os.environ.copy().items() if k != "CUDA_VISIBLE_DEVICES"}
    if value is not None:
        env["CUDA_VISIBLE_DEVICES"] = value
    try:
        printed = subprocess.check_output([python, "-c", "import torch; print(torch.cuda.device_count())"],
                                          env=env, stderr=subprocess.PIPE, text=True, timeout=timeout_s)
    except subprocess.CalledProcessError as err:
        raise RuntimeError(f"child failed ({err.returncode}): {err.stderr}") from err
    return int(printed.split()[-1])
'''),
    Alternative(cell="day01_gpus_seen_with",
                why="Popen + communicate(timeout=...), killing the child on timeout and raising RuntimeError",
                source='''def gpus_seen_with(value: str | None, python: str = sys.executable, timeout_s: float = 120.0) -> int:
    child_env = dict(os.environ)
    child_env.pop("CUDA_VISIBLE_DEVICES", None)
    if value is not None:
        child_env["CUDA_VISIBLE_DEVICES"] = value
    proc = subprocess.Popen([python, "-c", "import torch; print(torch.cuda.device_count())"], env=child_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"the probe did not answer within {timeout_s} s")
    if proc.returncode:
        raise RuntimeError(f"the probe failed with {proc.returncode}: {err}")
    return int(out.strip())
'''),
    # --- Exercise 3: parse_torch_version
    Alternative(cell="day01_parse_torch_version",
                why="packaging.version.Version for the release and a regex search for the cu tag",
                source='''import re

def parse_torch_version(version: str) -> dict:
    from packaging.version import Version

    release = Version(version.strip()).release
    tag = re.search(r"\\+cu(\\d+)$", version.strip())
    cuda = (int(tag.group(1)[:-1]), int(tag.group(1)[-1])) if tag else None
    return {"version": tuple(release[:3]), "cuda": cuda}
'''),
    Alternative(cell="day01_parse_torch_version",
                why="split on '+' and '.', keep the leading digits of each of the first three parts, divmod the tag",
                source='''import re

def parse_torch_version(version: str) -> dict:
    public, _, local = version.strip().partition("+")
    parts = public.split(".")[:3]
    numbers = tuple(int(re.match(r"\\d+", p).group()) for p in parts)
    cuda = None
    if local.startswith("cu") and local[2:].isdigit():
        major, minor = divmod(int(local[2:]), 10)
        cuda = (major, minor)
    return {"version": numbers, "cuda": cuda}
'''),
    # --- Exercise 4: runs_on
    Alternative(cell="day01_runs_on",
                why="integers like torch's own check (10 * major + minor, // 10 and % 10), two passes over the list",
                source='''def runs_on(arch_list: list[str], capability: tuple[int, int]) -> str:
    gpu = 10 * capability[0] + capability[1]
    cubins, ptx = [], []
    for entry in arch_list:
        kind, _, number = entry.partition("_")
        if number.isdigit() and kind in ("sm", "compute"):
            (cubins if kind == "sm" else ptx).append(int(number))
    if any(cc // 10 == gpu // 10 and cc % 10 <= gpu % 10 for cc in cubins):
        return "cubin"
    if any(cc <= gpu for cc in ptx):
        return "ptx"
    return "none"
'''),
    Alternative(cell="day01_runs_on",
                why="a regex findall over the joined list and tuple comparisons, returning from a ranked set",
                source='''def runs_on(arch_list: list[str], capability: tuple[int, int]) -> str:
    major, minor = capability
    found = set()
    for kind, digits in re.findall(r"\\b(sm|compute)_(\\d+)\\b", " ".join(arch_list)):
        built_major, built_minor = divmod(int(digits), 10)
        if kind == "sm" and built_major == major and built_minor <= minor:
            found.add("cubin")
        elif kind == "compute" and (built_major, built_minor) <= (major, minor):
            found.add("ptx")
    for answer in ("cubin", "ptx"):
        if answer in found:
            return answer
    return "none"
'''),
]
