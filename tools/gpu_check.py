#!/usr/bin/env python3
"""The GPU check kit: one command, run on a CUDA machine, that checks the course there and records what notebooks
show when they cannot measure live. See results/README.md for the whole flow.

    python tools/gpu_check.py --wheels build/gpu_wheels    # on the GPU machine: install what is missing, run all
    python tools/gpu_check.py --only failed                 # rerun only what failed or timed out last time
    python tools/gpu_check.py --only day09,gpu_reference    # rerun some parts (names: --list)
    python tools/gpu_check.py --resume old_bundle.tar.gz --only failed   # the same, on a fresh machine
    python tools/gpu_check.py --dry-run                     # on a CPU: every part at toy size, bundle in a temp dir
    python tools/gpu_check.py --download-wheels build/gpu_wheels   # here, with PyPI: fetch the wheels it needs
    python tools/gpu_check.py --unpack gpu_check_bundle.tar.gz     # here: put the recordings into the checkout

Part A runs every notebook of solutions/ at DEVICE="cuda", SMOKE=True, several at once (table in
results/gpu_check/part_a.json and part_a.md). Part B records the full-size GPU results of Days 02, 03, 08, 09, 11,
13, 14, 22, 24, 25, 27, 30 and 32 (results/dayNN/<gpu>.json; tools/gpu_check/recorders.py and, for the ResNet50
ones, tools/gpu_check/full_scale_recorders.py say what each measures), the GPU reference benchmark and the
loop-overhead benchmark (benchmarks/results/). Every part has a time budget sized for one H200 (`--list` prints them):
Part A 180 s, the recorders 499 s (day14 60, day24 140, day25 55, day30 50, day32 40, day09 50, day11 20, day13 15,
day08 20, day22 15, day03 12, day02 12, day27 10, in this running order, the most valuable first), the benchmarks
140 s (gpu_reference 100, loop_overhead 40): 819 s in all. A part that overruns is stopped and reported, and
`--only failed` reruns it. The kit's own budget (--time-budget, 420 s: what one device call leaves after starting and
installing the wheels) holds about half of that: the first call runs Part A, day14 and day24, and then only parts
whose budget still fits (a part that does not fit is not started, so a smaller later one may run); the parts it did
not start are marked `not run`, and a second call, `--resume <first bundle> --only failed`, runs the rest (about
400 s: day25, day30, day09 ... and the two benchmarks). Everything
lands in one bundle (a .tar.gz of at most 16 MiB) that unpacks into results/ and benchmarks/results/; every JSON in
it carries utils.profiling.provenance and loads with utils.profiling.load_recorded_results.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tools")]

WHEEL_LIST = REPO / "tools" / "gpu_check_wheels.txt"
MAX_WHEELS_BYTES = 40 * 2**20
MAX_BUNDLE_BYTES = 16 * 2**20
TOTAL_BUDGET_S = 420.0                      # the whole kit on one H200
NOTEBOOKS_BUDGET_S = 180.0                  # Part A
BENCHMARK_BUDGET_S = {"gpu_reference": 100.0, "loop_overhead": 40.0}
DRY_RUN_NOTEBOOK = "day03"
DRY_RUN_SLACK = 3.0                         # a loaded CPU runs the toy sizes slower than an H200 runs full ones


# ----------------------------------------------------------------------------------------------------- wheels
def wheel_list(path: Path = WHEEL_LIST) -> tuple[list[str], list[str]]:
    """``(pinned requirements to download, top-level names to install)`` from the wheel list file."""
    pins, top = [], []
    for line in path.read_text().splitlines():
        text = line.strip()
        if text.startswith("# install:"):
            top += text.split(":", 1)[1].split()
        elif text and not text.startswith("#"):
            pins.append(text.split("#")[0].strip())
    if not top or any("==" not in p for p in pins):
        raise ValueError(f"{path}: needs a '# install:' line and only pinned 'name==version' lines")
    return pins, top


def download_wheels(dest: Path) -> int:
    """Fetch every wheel of the list for CPython 3.12 on x86-64 Linux into ``dest`` (no dependencies resolved: the
    list is the closure) and check that together they stay under 40 MiB."""
    pins, _ = wheel_list()
    dest.mkdir(parents=True, exist_ok=True)
    platforms = ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_26_x86_64", "manylinux_2_28_x86_64",
                 "manylinux_2_12_x86_64", "manylinux2010_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64"]
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
           "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
           "--abi", "abi3", "--abi", "none"]
    for p in platforms:
        cmd += ["--platform", p]
    proc = subprocess.run(cmd + ["-d", str(dest), *pins])
    if proc.returncode != 0:
        print("pip download failed (see above): check the pins in", WHEEL_LIST.relative_to(REPO))
        return proc.returncode
    wanted = {p.split("==")[0].lower().replace("-", "_") for p in pins}
    for whl in dest.glob("*.whl"):   # one version of each: stale wheels from an older list would confuse pip
        if whl.name.split("-")[0].lower().replace("-", "_") not in wanted:
            whl.unlink()
    wheels = sorted(dest.glob("*.whl"), key=lambda p: -p.stat().st_size)
    total = sum(w.stat().st_size for w in wheels)
    for w in wheels[:8]:
        print(f"  {w.stat().st_size / 2**20:6.2f} MiB  {w.name}")
    print(f"{len(wheels)} wheels, {total / 2**20:.1f} MiB in {dest} (limit {MAX_WHEELS_BYTES / 2**20:.0f} MiB)")
    if len(wheels) != len(pins):
        print(f"expected {len(pins)} wheels, found {len(wheels)}")
        return 1
    if total > MAX_WHEELS_BYTES:
        print("too large to carry: trim the list")
        return 1
    return 0


def install_wheels(wheel_dir: Path) -> None:
    """Install what is missing of the kit's needs from ``wheel_dir``, offline; already-installed packages that
    satisfy the requirements stay as they are."""
    _, top = wheel_list()
    modules = {"mlflow-skinny": "mlflow", "nvidia-ml-py": "pynvml"}
    missing = [name for name in top if importlib.util.find_spec(modules.get(name, name).replace("-", "_")) is None]
    if not missing:
        print("wheels: everything the kit needs is already installed")
        return
    if not wheel_dir.is_dir():
        sys.exit(f"{', '.join(missing)} missing and {wheel_dir} does not exist: build it with "
                 "`python tools/gpu_check.py --download-wheels build/gpu_wheels` where PyPI is reachable and carry it")
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
           "--no-cache-dir", "--find-links", str(wheel_dir), *missing]
    print("wheels: installing", " ".join(missing))
    if subprocess.run(cmd).returncode != 0:
        sys.exit("offline install failed (see pip's message above)")


# ----------------------------------------------------------------------------------------------------- bundle
BUNDLE_ROOTS = ("results/", "benchmarks/results/")


def write_bundle(bundle_dir: Path, dest: Path, limit_bytes: int = MAX_BUNDLE_BYTES) -> int:
    """Pack ``bundle_dir`` (holding results/ and benchmarks/results/) into the .tar.gz ``dest``; raise
    ``ValueError`` naming the largest files when it exceeds ``limit_bytes``. Returns its size in bytes."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in bundle_dir.rglob("*") if p.is_file())
    with tarfile.open(dest, "w:gz") as tar:
        for path in files:
            tar.add(path, arcname=str(path.relative_to(bundle_dir)))
    size = dest.stat().st_size
    if size > limit_bytes:
        biggest = sorted(files, key=lambda p: -p.stat().st_size)[:5]
        raise ValueError(f"bundle {dest} is {size / 2**20:.1f} MiB, over the {limit_bytes / 2**20:.0f} MiB limit; "
                         "largest files: " + ", ".join(f"{p.relative_to(bundle_dir)} "
                                                       f"({p.stat().st_size / 2**20:.1f} MiB)" for p in biggest))
    return size


def unpack_bundle(bundle: Path, repo: Path = REPO) -> list[Path]:
    """Extract a bundle into ``repo``: only regular files under results/ and benchmarks/results/; every JSON must
    load with :func:`utils.profiling.load_recorded_file`. Returns the files written."""
    from utils.profiling import load_recorded_file

    written = []
    with tarfile.open(bundle, "r:gz") as tar:
        members = tar.getmembers()
        for m in members:
            parts = Path(m.name).parts
            if not m.isfile() or m.name.startswith("/") or ".." in parts or not m.name.startswith(BUNDLE_ROOTS):
                raise ValueError(f"{bundle}: refusing {m.name!r}: only files under {' and '.join(BUNDLE_ROOTS)}")
        for m in members:
            if m.name.endswith(".json"):
                load_recorded_file_bytes = tar.extractfile(m).read()  # type: ignore[union-attr]
                with tempfile.TemporaryDirectory() as tmp:
                    probe = Path(tmp) / Path(m.name).name
                    probe.write_bytes(load_recorded_file_bytes)
                    load_recorded_file(probe)
        for m in members:
            target = repo / m.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(m).read())  # type: ignore[union-attr]
            written.append(target)
    return written


# ------------------------------------------------------------------------------------------------------ parts
def all_parts() -> dict[str, float]:
    """Every part's name and budget in seconds on an H200, in running order."""
    from gpu_check.recorders import RECORDERS

    return {"notebooks": NOTEBOOKS_BUDGET_S, **{d: r.budget_s for d, r in RECORDERS.items()}, **BENCHMARK_BUDGET_S}


def select_parts(only: str | None, previous: dict[str, dict]) -> list[str]:
    """The parts to run: all, or those named in ``only`` (comma-separated; ``failed`` = every part whose last
    status was not ``pass``)."""
    names = list(all_parts())
    if not only:
        return names
    wanted: list[str] = []
    for item in (s.strip() for s in only.split(",") if s.strip()):
        if item == "failed":
            wanted += [n for n in names if n in previous and previous[n]["status"] != "pass"]
        elif item in names:
            wanted.append(item)
        else:
            raise SystemExit(f"--only: unknown part {item!r}; parts are {', '.join(names)} or 'failed'")
    return [n for n in names if n in wanted]


def run_recorders(days: list[str], bundle: Path, device: str, tiny: bool, slack: float, deadline: float,
                  work: Path) -> dict[str, dict]:
    """Run the day recorders in a worker process, one after another; kill a recorder that overruns ``slack`` x its
    budget (or the kit's deadline), mark it ``timeout`` and go on with the rest in a fresh worker."""
    from gpu_check.recorders import RECORDERS

    results: dict[str, dict] = {}
    pending = list(days)
    status_file = work / "recorders.jsonl"
    while pending:
        if time.monotonic() > deadline:
            results.update({d: {"status": "not run", "seconds": 0.0, "error": "the kit's time budget was spent"}
                            for d in pending})
            break
        status_file.write_text("")
        wall_deadline = time.time() + (deadline - time.monotonic())   # the worker's clock is the wall clock
        cmd = [sys.executable, __file__, "--worker-recorders", ",".join(pending), "--worker-bundle", str(bundle),
               "--worker-status", str(status_file), "--device", device, "--worker-deadline", str(wall_deadline)]
        cmd += ["--worker-tiny"] if tiny else []
        log = open(work / "logs" / "recorders.log", "a")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        current, started, seen = None, 0.0, 0
        while True:
            lines = status_file.read_text().splitlines()
            for line in lines[seen:]:
                event = json.loads(line)
                if event["event"] == "start":
                    current, started = event["day"], time.monotonic()
                else:
                    results[event["day"]] = {k: event[k] for k in ("status", "seconds", "error")}
                    print(f"  {event['status']:<8} {event['seconds']:6.1f} s  {event['day']}"
                          + (f"  <- {event['error']}" if event["error"] else ""))
                    pending.remove(event["day"])
                    current = None
            seen = len(lines)
            if proc.poll() is not None:
                break
            if current and (time.monotonic() - started > slack * RECORDERS[current].budget_s
                            or time.monotonic() > deadline):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                limit = slack * RECORDERS[current].budget_s
                results[current] = {"status": "timeout", "seconds": round(time.monotonic() - started, 1),
                                    "error": f"stopped after {limit:.0f} s (budget {RECORDERS[current].budget_s:.0f} s)"}
                print(f"  timeout  {results[current]['seconds']:6.1f} s  {current}")
                pending.remove(current)
                break
            time.sleep(0.2)
        log.close()
        if current in pending:   # the worker died inside a recorder
            results[current] = {"status": "fail", "seconds": round(time.monotonic() - started, 1),
                                "error": f"the worker process exited with code {proc.returncode} (see logs)"}
            pending.remove(current)
    return results


def worker_recorders(days: list[str], bundle: Path, status_file: Path, device_name: str, tiny: bool,
                     deadline: float = math.inf) -> int:
    """The worker side of :func:`run_recorders`: run each recorder, write its result file, report to the status
    file (one JSON line when a recorder starts and one when it ends). A full-size recorder whose budget does not fit
    before ``deadline`` (wall-clock seconds) is not started: it is reported ``not run`` and the next, smaller ones
    may still fit; ``--only failed`` runs it in the next call."""
    import torch

    from gpu_check.recorders import RECORDERS, Context, gpu_slug
    from utils.device import pick_device
    from utils.profiling import provenance, write_recorded

    device = pick_device(device_name)
    slug = gpu_slug(device)

    def report(**event) -> None:
        with open(status_file, "a") as f:
            f.write(json.dumps(event) + "\n")

    for day in days:
        rec = RECORDERS[day]
        if not tiny and time.time() + rec.budget_s > deadline:
            report(event="done", day=day, status="not run", seconds=0.0,
                   error=f"its budget ({rec.budget_s:.0f} s) did not fit in what was left of the kit's")
            continue
        report(event="start", day=day)
        start = time.perf_counter()
        out_dir = bundle / "results" / day
        try:
            torch.manual_seed(0)
            payload = rec.fn(Context(device, tiny, out_dir, slug, rec.budget_s))
            command = f"python tools/gpu_check.py --only {day}" + (" --dry-run" if tiny else "")
            what = f"dry run at toy sizes of: {rec.what}" if tiny else rec.what
            write_recorded(out_dir / f"{slug}.json", {"day": day, "what": what, "tiny": tiny, **payload},
                           provenance(device, command))
            status, error = "pass", None
        except Exception as e:  # one recorder's failure must not stop the others
            traceback.print_exc()
            status, error = "fail", f"{type(e).__name__}: {str(e)[:300]}"
        report(event="done", day=day, status=status, seconds=round(time.perf_counter() - start, 1), error=error)
    return 0


def loop_overhead_args(device: str, tiny: bool) -> tuple[list[str], str | None]:
    """Arguments for benchmarks/loop_overhead.py: ResNet50 at 224 px in bf16 where its CLI offers those options."""
    if tiny:
        return ["--smoke"], None
    help_text = subprocess.run([sys.executable, str(REPO / "benchmarks" / "loop_overhead.py"), "--help"],
                               capture_output=True, text=True, cwd=REPO).stdout
    wanted = {"--model": "resnet50", "--image-size": "224", "--amp": "bf16"}
    if all(flag in help_text for flag in wanted):
        return [x for kv in wanted.items() for x in kv], None
    return [], ("loop_overhead.py has no --model/--image-size/--amp options: ran its default configurations "
                "(small CNN and ResNet50 at 32 px, fp32) instead of ResNet50 at 224 px in bf16")


def run_benchmark(name: str, bundle: Path, device: str, tiny: bool, budget_s: float, work: Path) -> dict:
    """Run one benchmark script into the bundle's benchmarks/results/, bounded by ``budget_s`` seconds."""
    from utils.profiling import load_recorded_file

    out = bundle / "benchmarks" / "results"
    note = None
    if name == "gpu_reference":
        args = (["--smoke", "--modes", "fp32,channels_last_bf16"] if tiny else
                ["--batches", "256", "--warmup", "5", "--steps", "15",
                 "--modes", "fp32,tf32,bf16,channels_last_bf16,compile_bf16"])
    else:
        args, note = loop_overhead_args(device, tiny)
    cmd = [sys.executable, str(REPO / "benchmarks" / f"{name}.py"), "--device", device, "--out", str(out), *args]
    start = time.monotonic()
    with open(work / "logs" / f"{name}.log", "w") as log:
        try:
            rc = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, timeout=budget_s).returncode
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "seconds": round(time.monotonic() - start, 1),
                    "error": f"stopped after {budget_s:.0f} s", "note": note}
    seconds = round(time.monotonic() - start, 1)
    written = sorted(out.glob(f"{name}_*.json"))
    if rc != 0 or not written:
        tail = (work / "logs" / f"{name}.log").read_text()[-300:].strip()
        return {"status": "fail", "seconds": seconds, "error": f"exit code {rc}: {tail}", "note": note}
    for path in written:
        load_recorded_file(path)
    return {"status": "pass", "seconds": seconds, "error": None, "note": note}


# ------------------------------------------------------------------------------------------------------- main
def run_kit(args: argparse.Namespace) -> int:
    import torch

    from gpu_check.notebooks import markdown_table, notebook_env, run_notebooks
    from utils.profiling import load_recorded_file, provenance, write_recorded

    device = "cpu" if args.dry_run else args.device
    if not args.dry_run and not torch.cuda.is_available():
        sys.exit(f"no CUDA device here (torch {torch.__version__}): this kit records GPU results. On a CPU run "
                 "`python tools/gpu_check.py --dry-run`.")
    work = Path(args.work) if args.work else (Path(tempfile.mkdtemp(prefix="gpu_check_dry_")) if args.dry_run
                                              else REPO / "build" / "gpu_check")
    bundle = work / "bundle"
    (work / "logs").mkdir(parents=True, exist_ok=True)
    if args.resume:   # a fresh machine: start from the last bundle, so --only failed knows what failed
        unpack_bundle(args.resume, bundle)
    kit_file = bundle / "results" / "gpu_check" / "kit.json"
    previous = {p["part"]: p for p in load_recorded_file(kit_file)["rows"]} if kit_file.exists() else {}
    parts = select_parts(args.only, previous)
    slack = DRY_RUN_SLACK if args.dry_run else 1.5
    kit_start = time.monotonic()
    deadline = kit_start + args.time_budget * (DRY_RUN_SLACK if args.dry_run else 1.0)
    print(f"GPU check on {device} ({'dry run, toy sizes' if args.dry_run else 'full size'}): {', '.join(parts)}\n"
          f"work folder {work}")
    results: dict[str, dict] = {}

    def part_a() -> dict[str, dict]:
        names = [args.notebooks] if args.notebooks else ([DRY_RUN_NOTEBOOK] if args.dry_run else None)
        notebooks = sorted(p.relative_to(REPO) for p in (REPO / "solutions").glob("day[0-9][0-9]/*.ipynb")
                           if names is None or p.parent.name in ",".join(names).split(","))
        print(f"Part A: {len(notebooks)} notebooks, {args.workers} at a time, budget {NOTEBOOKS_BUDGET_S:.0f} s")
        start = time.monotonic()
        budget = min(NOTEBOOKS_BUDGET_S * (DRY_RUN_SLACK if args.dry_run else 1.0), deadline - time.monotonic())
        rows = run_notebooks(notebooks, REPO, work, device, args.workers, budget, notebook_env(REPO, args.workers))
        part_a = bundle / "results" / "gpu_check" / "part_a.json"
        if part_a.exists():   # a rerun of some notebooks keeps the others' last result
            ran = {r["notebook"] for r in rows}
            rows = sorted([r for r in load_recorded_file(part_a)["rows"] if r["notebook"] not in ran] + rows,
                          key=lambda r: r["notebook"])
        passed = sum(r["status"] == "pass" for r in rows)
        title = f"Part A: solution notebooks at SMOKE=True, DEVICE=\"{device}\""
        write_recorded(part_a, {"what": title, "summary": [f"{passed} of {len(rows)} notebooks passed"],
                                "workers": args.workers, "rows": rows},
                       provenance(device, "python tools/gpu_check.py --only notebooks"))
        (part_a.parent / "part_a.md").write_text(markdown_table(rows, title))
        failed = [r["notebook"] for r in rows if r["status"] != "pass"]
        return {"notebooks": {"status": "pass" if not failed else "fail", "seconds": round(time.monotonic() - start, 1),
                              "error": f"{len(failed)} not passed: {', '.join(failed)}" if failed else None}}

    def part_b_days() -> dict[str, dict]:
        days = [p for p in parts if p.startswith("day")]
        print(f"Part B: day recorders {', '.join(days)}")
        return run_recorders(days, bundle, device, args.dry_run, slack, deadline, work)

    def benchmark(name: str) -> dict[str, dict]:
        if not args.dry_run and deadline - time.monotonic() < BENCHMARK_BUDGET_S[name]:
            print(f"  not run  {0:6.1f} s  {name}  <- its budget did not fit in what was left of the kit's")
            return {name: {"status": "not run", "seconds": 0.0, "error": "its budget did not fit in what was left "
                           "of the kit's time budget", "note": None}}
        budget = min(BENCHMARK_BUDGET_S[name] * slack, max(1.0, deadline - time.monotonic()))
        r = run_benchmark(name, bundle, device, args.dry_run, budget, work)
        print(f"  {r['status']:<8} {r['seconds']:6.1f} s  {name}" + (f"  <- {r['error']}" if r["error"] else "")
              + (f"  (note: {r['note']})" if r.get("note") else ""))
        return {name: r}

    tasks = ([part_a] if "notebooks" in parts else []) + ([part_b_days] if any(p.startswith("day") for p in parts)
                                                          else [])
    tasks += [lambda name=name: benchmark(name) for name in BENCHMARK_BUDGET_S if name in parts]
    if args.dry_run:   # toy sizes check code paths, not speed: run the parts side by side to keep the test short
        with ThreadPoolExecutor(max_workers=len(tasks) or 1) as pool:
            for done in list(pool.map(lambda task: task(), tasks)):
                results.update(done)
    else:              # on the GPU, parts run one after another so that none disturbs another's measurements
        for task in tasks:
            results.update(task())

    budgets = all_parts()
    merged = {**previous, **{n: {"part": n, "budget_s": budgets[n], **r} for n, r in results.items()}}
    rows = [merged[n] for n in budgets if n in merged]
    total = time.monotonic() - kit_start
    ok = all(r["status"] == "pass" for r in rows)
    write_recorded(kit_file, {"what": "GPU check kit: status of every part", "rows": rows,
                              "summary": [f"this run: {', '.join(parts)} in {total:.0f} s "
                                          f"(budget {args.time_budget:.0f} s on an H200)",
                                          "all parts passed" if ok else "not passed: " + ", ".join(
                                              r["part"] for r in rows if r["status"] != "pass")]},
                   provenance(device, "python tools/gpu_check.py" + (" --dry-run" if args.dry_run else "")))
    dest = Path(args.bundle) if args.bundle else work / "gpu_check_bundle.tar.gz"
    try:
        size = write_bundle(bundle, dest)
    except ValueError as e:
        print(f"BUNDLE TOO LARGE: {e}")
        return 2
    print(f"\n{'part':<14} {'status':<8} {'seconds':>8} {'budget':>7}")
    for r in rows:
        print(f"{r['part']:<14} {r['status']:<8} {r['seconds']:>8.1f} {r['budget_s']:>7.0f}")
    print(f"total {total:.0f} s; bundle {dest} ({size / 2**20:.2f} MiB). "
          + ("All parts passed." if ok else "Rerun what failed: python tools/gpu_check.py --only failed"))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="the CUDA device to check (default cuda)")
    ap.add_argument("--only", help="comma-separated parts to run (see --list), or 'failed'")
    ap.add_argument("--notebooks", help="Part A on these days only, e.g. day05,day07")
    ap.add_argument("--workers", type=int, default=max(1, min(10, (os.cpu_count() or 2) // 2)),
                    help="notebooks run at once in Part A (default: half the cores, at most 10)")
    ap.add_argument("--time-budget", type=float, default=TOTAL_BUDGET_S, help="seconds for the whole kit")
    ap.add_argument("--work", help="work folder (default build/gpu_check; a temp folder with --dry-run)")
    ap.add_argument("--bundle", help="where to write the bundle (default <work>/gpu_check_bundle.tar.gz)")
    ap.add_argument("--resume", type=Path, metavar="BUNDLE",
                    help="start from an earlier bundle (with --only failed on a fresh machine)")
    ap.add_argument("--dry-run", action="store_true", help="on the CPU: one notebook, every recorder at toy size")
    ap.add_argument("--wheels", type=Path, help="install missing packages offline from this wheel folder first")
    ap.add_argument("--download-wheels", type=Path, metavar="DIR", help="download the kit's wheels into DIR")
    ap.add_argument("--unpack", type=Path, metavar="BUNDLE", help="extract a bundle into this checkout")
    ap.add_argument("--list", action="store_true", help="print the parts and their budgets")
    ap.add_argument("--worker-recorders", help=argparse.SUPPRESS)
    ap.add_argument("--worker-bundle", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--worker-status", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--worker-tiny", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-deadline", type=float, default=math.inf, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.download_wheels:
        return download_wheels(args.download_wheels)
    if args.unpack:
        for path in unpack_bundle(args.unpack):
            print("wrote", path.relative_to(REPO))
        return 0
    if args.list:
        parts = all_parts()
        for name, budget in parts.items():
            print(f"{name:<14} {budget:5.0f} s")
        print(f"{'all parts':<14} {sum(parts.values()):5.0f} s; the kit stops at --time-budget "
              f"({args.time_budget:.0f} s) and a second call with --only failed runs what it did not reach")
        return 0
    if args.worker_recorders:
        return worker_recorders(args.worker_recorders.split(","), args.worker_bundle, args.worker_status,
                                args.device, args.worker_tiny, args.worker_deadline)
    if args.wheels:
        install_wheels(args.wheels)
    return run_kit(args)


if __name__ == "__main__":
    sys.exit(main())
