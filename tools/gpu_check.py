#!/usr/bin/env python3
"""The GPU check kit: one command, run on a CUDA machine in one device call, that checks the course there and
records what notebooks show when they cannot measure live. See results/README.md for the whole flow.

    python tools/gpu_check.py --wheels build/gpu_wheels    # on the GPU machine: install what is missing, run all
    python tools/gpu_check.py --list                        # the parts, their budgets and the running order
    python tools/gpu_check.py --only failed                 # rerun every part that did not pass (or never ended)
    python tools/gpu_check.py --only day09,gpu_reference    # rerun some parts (names: --list)
    python tools/gpu_check.py --resume old_bundle.tar.gz --only failed   # the same, on a fresh machine
    python tools/gpu_check.py --dry-run                     # on a CPU: every part at toy size, bundle in a temp dir
    python tools/gpu_check.py --resolve-wheels              # here, with PyPI and a Python 3.12: the wheel list
    python tools/gpu_check.py --download-wheels build/gpu_wheels   # here, with PyPI: fetch the wheels it needs
    python tools/gpu_check.py --unpack gpu_check_bundle.tar.gz     # here: put the recordings into the checkout

The parts run one after another in this order, each within a time budget sized for one H200, and the whole kit
within 480 s (--time-budget), which with the wheel install (about 30 s) fits one device call of the 15 minutes a
session gets, machine start included:

1. The benchmarks, trimmed to their key rows: gpu_reference 35 s (ResNet50 at 224 px, batch 256, channels_last +
   bf16, bf16 and TF32, cudnn.benchmark on and recorded), loop_overhead 20 s (the course loop against a bare one,
   ResNet50 224 px bf16 on CUDA), input_path 12 s (host CPU per image, JPEG decoding against the decoded cache).
2. Part A, notebooks 140 s: every notebook of solutions/ at DEVICE="cuda", SMOKE=True, four at once, Day 09 alone,
   longest first (tools/gpu_check/notebooks.py); its table goes to results/gpu_check/part_a.json and part_a.md.
3. The cheap day recorders (tools/gpu_check/recorders.py): day11 15, day09 25, day13 10, day08 10, day22 12, day03 8,
   day02 8, day27 8.
4. The ResNet50 recorders (tools/gpu_check/full_scale_recorders.py): day14 45, day25 35, day32 20, day30 15 (skipped
   where onnxruntime has no CUDA provider), day24 60.
5. Optional, only if the budget still holds it: gpu_reference_extra 90 s (the torch.compile and IEEE fp32 rows).

Required parts: 478 s in all. A part starts only if its budget fits in what is left (else `not run`); one that
overruns its budget by a quarter is stopped (`timeout`), keeping what it saved so far (Part A stops its notebooks at
its budget itself, and the part is then `fail`). The bundle (a .tar.gz of at most 16 MiB that unpacks into results/
and benchmarks/results/) is rewritten after every part and while recorders save partial payloads, so a call cut
short still returns what ran. `--only failed` reruns every part (and Part A's
notebooks) that did not pass, including those a call cut short never finished (they have no status); every JSON
carries utils.profiling.provenance and loads with utils.profiling.load_recorded_results. Every process the kit starts
runs with MLFLOW_DISABLE_TELEMETRY=true and DO_NOT_TRACK=true, and in the dry run the recorders and benchmarks with
one OpenMP thread (Part A's notebooks, there as on the GPU machine, share the cores among --workers).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tools")]

from gpu_check.wheels import MAX_WHEELS_BYTES, WHEEL_LIST, wheel_list  # noqa: E402,F401  (re-exported)

MAX_BUNDLE_BYTES = 16 * 2**20
TOTAL_BUDGET_S = 480.0                      # the whole kit on one H200, in one device call
NOTEBOOKS_BUDGET_S = 140.0                  # Part A
BENCHMARK_BUDGET_S = {"gpu_reference": 35.0, "loop_overhead": 20.0, "input_path": 12.0}
OPTIONAL_BUDGET_S = {"gpu_reference_extra": 90.0}
DRY_RUN_NOTEBOOK = "day03"
DRY_RUN_SLACK = 3.0                         # a loaded CPU runs the toy sizes slower than an H200 runs full ones
DRY_RUN_MIN_LIMIT_S = 150.0                 # ... and checks code paths, not speed: no part is stopped sooner
GPU_SLACK = 1.25                            # a part is stopped at this multiple of its budget
PASSED = ("pass", "skipped")


# ----------------------------------------------------------------------------------------------------- bundle
BUNDLE_ROOTS = ("results/", "benchmarks/results/")


def write_bundle(bundle_dir: Path, dest: Path, limit_bytes: int = MAX_BUNDLE_BYTES) -> int:
    """Pack ``bundle_dir`` (holding results/ and benchmarks/results/; hidden files, which are writes in progress,
    left out) into the .tar.gz ``dest``, atomically (a call killed while packing leaves the previous bundle); raise ``ValueError`` naming the largest files when it exceeds
    ``limit_bytes``. Returns its size in bytes."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in bundle_dir.rglob("*") if p.is_file() and not p.name.startswith("."))
    tmp = dest.with_name(dest.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for path in files:
            tar.add(path, arcname=str(path.relative_to(bundle_dir)))
    size = tmp.stat().st_size
    if size > limit_bytes:
        tmp.unlink()
        biggest = sorted(files, key=lambda p: -p.stat().st_size)[:5]
        raise ValueError(f"bundle {dest} is {size / 2**20:.1f} MiB, over the {limit_bytes / 2**20:.0f} MiB limit; "
                         "largest files: " + ", ".join(f"{p.relative_to(bundle_dir)} "
                                                       f"({p.stat().st_size / 2**20:.1f} MiB)" for p in biggest))
    os.replace(tmp, dest)
    return size


def unpack_bundle(bundle: Path, repo: Path = REPO, allow_toy: bool = False) -> list[Path]:
    """Extract a bundle into ``repo``: only regular files under results/ and benchmarks/results/; every JSON must
    load with :func:`utils.profiling.load_recorded_file` and, unless ``allow_toy``, come from a full-size run (a dry
    run's toy-size files can carry the names of committed CPU results). Returns the files written; a refused
    bundle writes nothing."""
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
                data = tar.extractfile(m).read()  # type: ignore[union-attr]
                with tempfile.TemporaryDirectory() as tmp:
                    probe = Path(tmp) / Path(m.name).name
                    probe.write_bytes(data)
                    rec = load_recorded_file(probe)
                toy = rec.get("tiny") or {"--dry-run", "--smoke"} & set(str(rec.get("source", "")).split())
                if toy and not allow_toy:   # a dry run's file names can be those of committed CPU results
                    raise ValueError(f"{bundle}: refusing {m.name!r}: a dry-run (toy size) recording "
                                     f"({rec.get('source')}), not a GPU result")
        for m in members:
            target = repo / m.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(m).read())  # type: ignore[union-attr]
            written.append(target)
    return written


# ------------------------------------------------------------------------------------------------------ parts
def all_parts(optional: bool = True) -> dict[str, float]:
    """Every part's name and budget in seconds on an H200, in running order (the optional ones last)."""
    from gpu_check.recorders import RECORDERS, RUN_ORDER

    parts = {**BENCHMARK_BUDGET_S, "notebooks": NOTEBOOKS_BUDGET_S, **{d: RECORDERS[d].budget_s for d in RUN_ORDER}}
    return {**parts, **OPTIONAL_BUDGET_S} if optional else parts


def select_parts(only: str | None, previous: dict[str, dict]) -> list[str]:
    """The parts to run, in running order: all, or those named in ``only`` (comma-separated; ``failed`` = every
    part whose last status was neither ``pass`` nor ``skipped``, or that has no status because a call cut short
    never finished it)."""
    names = list(all_parts())
    if not only:
        return names
    wanted: list[str] = []
    for item in (s.strip() for s in only.split(",") if s.strip()):
        if item == "failed":
            wanted += [n for n in names if n not in previous or previous[n]["status"] not in PASSED]
        elif item in names:
            wanted.append(item)
        else:
            raise SystemExit(f"--only: unknown part {item!r}; parts are {', '.join(names)} or 'failed'")
    return [n for n in names if n in wanted]


def part_env(dry_run: bool) -> dict[str, str]:
    """The environment of the recorder and benchmark processes: no telemetry, and one OpenMP thread in the dry run
    (its parts run side by side on a small CPU); on the GPU machine every core."""
    from gpu_check.notebooks import quiet_env

    threads = 1 if dry_run else (os.cpu_count() or 1)
    env = quiet_env(dict(os.environ), threads)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


# -------------------------------------------------------------------------------------------------- recorders
def part_limit(budget_s: float, dry_run: bool) -> float:
    """Seconds after which a part is stopped: a quarter over its budget on the GPU; in the dry run (toy sizes on a
    possibly loaded CPU, parts side by side) three times its budget, and never under two and a half minutes."""
    return max(DRY_RUN_MIN_LIMIT_S, DRY_RUN_SLACK * budget_s) if dry_run else GPU_SLACK * budget_s


def run_recorders(days: list[str], bundle: Path, device: str, tiny: bool, deadline: float, work: Path,
                  env: dict[str, str], repack=lambda: None) -> dict[str, dict]:
    """Run the day recorders in a worker process, one after another; kill a recorder that overruns its limit
    (:func:`part_limit`) or the kit's deadline, mark it ``timeout`` (what it saved stays in the bundle) and go on
    with the rest in a fresh worker. A worker that dies before its first recorder (CUDA fails to start, an import
    error) marks every pending day ``fail`` with its exit code and log tail: a fresh one would die the same way.
    ``repack()`` is called when the worker has written something new (at most every 5 s)."""
    from gpu_check.notebooks import kill_tree
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
        waiting = len(pending)
        wall_deadline = time.time() + (deadline - time.monotonic())   # the worker's clock is the wall clock
        cmd = [sys.executable, __file__, "--worker-recorders", ",".join(pending), "--worker-bundle", str(bundle),
               "--worker-status", str(status_file), "--device", device, "--worker-deadline", str(wall_deadline)]
        cmd += ["--worker-tiny"] if tiny else []
        log = open(work / "logs" / "recorders.log", "a")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        current, started, seen, packed = None, 0.0, 0, time.monotonic()
        while True:
            lines = status_file.read_text().splitlines()
            for line in lines[seen:]:
                event = json.loads(line)
                if event["event"] == "start":
                    current, started = event["day"], time.monotonic()
                elif event["event"] == "saved":
                    if time.monotonic() - packed > 5:
                        repack()
                        packed = time.monotonic()
                else:
                    results[event["day"]] = {k: event[k] for k in ("status", "seconds", "error")}
                    print(f"  {event['status']:<8} {event['seconds']:6.1f} s  {event['day']}"
                          + (f"  <- {event['error']}" if event["error"] else ""), flush=True)
                    pending.remove(event["day"])
                    current = None
                    repack()
                    packed = time.monotonic()
            seen = len(lines)
            if proc.poll() is not None:
                break
            limit = part_limit(RECORDERS[current].budget_s, tiny) if current else 0.0
            if current and (time.monotonic() - started > limit or time.monotonic() > deadline):
                kill_tree(proc.pid)
                proc.wait()
                results[current] = {"status": "timeout", "seconds": round(time.monotonic() - started, 1),
                                    "error": f"stopped after {min(limit, time.monotonic() - started):.0f} s (budget "
                                             f"{RECORDERS[current].budget_s:.0f} s); what it saved is kept"}
                print(f"  timeout  {results[current]['seconds']:6.1f} s  {current}", flush=True)
                pending.remove(current)
                current = None
                break
            time.sleep(0.2)
        log.close()
        if current in pending:   # the worker died inside a recorder
            results[current] = {"status": "fail", "seconds": round(time.monotonic() - started, 1),
                                "error": f"the worker process exited with code {proc.returncode} (see logs)"}
            pending.remove(current)
        elif len(pending) == waiting:   # it died before its first recorder: a fresh worker would too
            log = work / "logs" / "recorders.log"
            tail = log.read_text()[-300:].strip() if log.exists() else "(no log)"
            results.update({d: {"status": "fail", "seconds": 0.0, "error": f"the recorder worker exited with code "
                                f"{proc.returncode} before its first recorder: {tail}"} for d in pending})
            break
    return results


def worker_recorders(days: list[str], bundle: Path, status_file: Path, device_name: str, tiny: bool,
                     deadline: float = math.inf) -> int:
    """The worker side of :func:`run_recorders`: run each recorder, write its result file (and its partial payloads
    as it saves them), report to the status file (one JSON line when a recorder starts, saves and ends). A recorder
    whose budget does not fit before ``deadline`` (wall-clock seconds) is not started: it is reported ``not run``
    and the next, smaller ones may still fit; ``--only failed`` runs it in a later call."""
    import torch

    from gpu_check.recorders import RECORDERS, Context, Skip, gpu_slug
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
        out_file = bundle / "results" / day / f"{slug}.json"
        command = f"python tools/gpu_check.py --only {day}" + (" --dry-run" if tiny else "")
        what = f"dry run at toy sizes of: {rec.what}" if tiny else rec.what

        def save(payload: dict, partial: bool = True) -> None:
            # a hidden name, then a rename: a recorder stopped mid-write leaves its last whole file in the bundle
            tmp = write_recorded(out_file.with_name(f".{out_file.name}.tmp"), {
                "day": day, "what": what, "tiny": tiny, "partial": partial, **payload}, provenance(device, command))
            os.replace(tmp, out_file)
            report(event="saved", day=day)

        try:
            torch.manual_seed(0)
            save(rec.fn(Context(device, tiny, out_file.parent, slug, rec.budget_s, saver=save)), partial=False)
            status, error = "pass", None
        except Skip as why:
            out_file.unlink(missing_ok=True)
            status, error = "skipped", str(why)
        except Exception as e:  # one recorder's failure must not stop the others
            traceback.print_exc()
            status, error = "fail", f"{type(e).__name__}: {str(e)[:300]}"
        report(event="done", day=day, status=status, seconds=round(time.perf_counter() - start, 1), error=error)
    return 0


# -------------------------------------------------------------------------------------------------- benchmarks
def benchmark_args(name: str, tiny: bool) -> list[str]:
    """The command-line arguments of each benchmark part: the key rows only, sized for the part's budget."""
    if name == "gpu_reference":
        return (["--smoke", "--modes", "channels_last_bf16,bf16,tf32"] if tiny else
                ["--batches", "256", "--warmup", "5", "--steps", "15", "--modes", "channels_last_bf16,bf16,tf32",
                 "--cudnn-benchmark"])
    if name == "gpu_reference_extra":     # the dry run leaves out compile: minutes of C++ builds on a CPU
        return (["--smoke", "--modes", "fp32", "--append"] if tiny else
                ["--batches", "256", "--warmup", "3", "--steps", "10", "--modes", "fp32,compile_bf16",
                 "--cudnn-benchmark", "--append"])
    if name == "loop_overhead":
        return ["--smoke"] if tiny else ["--model", "resnet50", "--image-size", "224", "--amp", "bf16", "--steps",
                                         "12", "--repeats", "3"]
    if name == "input_path":
        return ["--smoke"] if tiny else ["--images", "100", "--rows", "2048"]
    raise ValueError(f"no benchmark part {name!r}")


def run_benchmark(name: str, bundle: Path, device: str, tiny: bool, limit_s: float, work: Path,
                  env: dict[str, str]) -> dict:
    """Run one benchmark script into the bundle's benchmarks/results/, stopped (with its process group) after
    ``limit_s`` seconds; the scripts write their file after every row, so a stopped one keeps its first rows."""
    from gpu_check.notebooks import kill_tree
    from utils.profiling import load_recorded_file

    out = bundle / "benchmarks" / "results"
    script = "gpu_reference" if name == "gpu_reference_extra" else name
    cmd = [sys.executable, str(REPO / "benchmarks" / f"{script}.py"), "--device", device, "--out", str(out),
           *benchmark_args(name, tiny)]
    start = time.monotonic()
    with open(work / "logs" / f"{name}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            rc = proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            proc.wait()
            return {"status": "timeout", "seconds": round(time.monotonic() - start, 1),
                    "error": f"stopped after {limit_s:.0f} s; the rows it wrote are kept"}
    seconds = round(time.monotonic() - start, 1)
    written = sorted(out.glob(f"{script}_*.json"))
    if rc != 0 or not written:
        tail = (work / "logs" / f"{name}.log").read_text()[-300:].strip()
        return {"status": "fail", "seconds": seconds, "error": f"exit code {rc}: {tail}"}
    for path in written:
        load_recorded_file(path)
    return {"status": "pass", "seconds": seconds, "error": None}


# ------------------------------------------------------------------------------------------------------- main
def notebook_selection(args: argparse.Namespace, previous_part_a: list[dict]) -> list[Path]:
    """Part A's notebooks: ``--notebooks`` (days, or ``all``), else the dry run's one notebook, else only those
    that did not pass last time when the part runs because of ``--only failed``, else all."""
    every = sorted(p.relative_to(REPO) for p in (REPO / "solutions").glob("day[0-9][0-9]/*.ipynb"))
    if args.notebooks and args.notebooks != "all":
        days = set(args.notebooks.split(","))
        return [p for p in every if p.parent.name in days]
    if args.notebooks == "all":
        return every
    if args.dry_run:
        return [p for p in every if p.parent.name == DRY_RUN_NOTEBOOK]
    only = {s.strip() for s in (args.only or "").split(",")}
    if "failed" in only and "notebooks" not in only and previous_part_a:
        failed = {r["notebook"] for r in previous_part_a if r["status"] != "pass"}
        return [p for p in every if str(p) in failed]
    return every


def run_kit(args: argparse.Namespace) -> int:
    import torch

    from gpu_check.notebooks import NOTEBOOK_LIMIT_S, markdown_table, notebook_env, run_notebooks
    from gpu_check.recorders import RECORDERS
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
        unpack_bundle(args.resume, bundle, allow_toy=args.dry_run)
    kit_file = bundle / "results" / "gpu_check" / "kit.json"
    part_a_file = bundle / "results" / "gpu_check" / "part_a.json"
    previous = {p["part"]: p for p in load_recorded_file(kit_file)["rows"]} if kit_file.exists() else {}
    parts = select_parts(args.only, previous)
    scale = DRY_RUN_SLACK if args.dry_run else 1.0
    kit_start = time.monotonic()
    deadline = kit_start + args.time_budget * scale
    dest = Path(args.bundle) if args.bundle else work / "gpu_check_bundle.tar.gz"
    env = part_env(args.dry_run)
    budgets = all_parts()
    results: dict[str, dict] = {}
    lock = threading.Lock()
    print(f"GPU check on {device} ({'dry run, toy sizes' if args.dry_run else 'full size'}): {', '.join(parts)}\n"
          f"work folder {work}; bundle {dest}", flush=True)

    def publish() -> None:
        """kit.json and the bundle, as they stand now: after every part, and while recorders save."""
        with lock:
            merged = {**previous, **{n: {"part": n, "budget_s": budgets[n], "optional": n in OPTIONAL_BUDGET_S,
                                         **r} for n, r in results.items()}}
            rows = [merged[n] for n in budgets if n in merged]
            done = [r for r in rows if r["part"] in parts and r["part"] in results]
            required = [r for r in rows if not r.get("optional")]
            ok = all(r["status"] in PASSED for r in required)
            write_recorded(kit_file, {"what": "GPU check kit: status of every part", "rows": rows,
                                      "summary": [f"this run: {len(done)} of {len(parts)} parts in "
                                                  f"{time.monotonic() - kit_start:.0f} s (budget "
                                                  f"{args.time_budget:.0f} s on an H200)",
                                                  "all required parts passed" if ok else "not passed: " + ", ".join(
                                                      r["part"] for r in required if r["status"] not in PASSED)]},
                           provenance(device, "python tools/gpu_check.py" + (" --dry-run" if args.dry_run else "")))
            try:
                write_bundle(bundle, dest)
            except ValueError as e:
                print(f"BUNDLE TOO LARGE: {e}", flush=True)

    def left() -> float:
        return deadline - time.monotonic()

    def part_a() -> dict[str, dict]:
        previous_rows = load_recorded_file(part_a_file)["rows"] if part_a_file.exists() else []
        notebooks = notebook_selection(args, previous_rows)
        budget = args.notebooks_budget or NOTEBOOKS_BUDGET_S * scale
        if not args.dry_run and left() < budget:
            return {"notebooks": {"status": "not run", "seconds": 0.0, "error": "its budget did not fit"}}
        print(f"Part A: {len(notebooks)} notebooks, {args.workers} at a time, budget {budget:.0f} s", flush=True)
        start = time.monotonic()
        limit = args.notebook_limit or NOTEBOOK_LIMIT_S * (600 / NOTEBOOK_LIMIT_S if args.dry_run else 1.0)
        rows = run_notebooks(notebooks, REPO, work, device, args.workers, min(budget, max(1.0, left())),
                             notebook_env(REPO, args.workers), limit_s=limit)
        ran = {r["notebook"] for r in rows}
        rows = sorted([r for r in previous_rows if r["notebook"] not in ran] + rows, key=lambda r: r["notebook"])
        passed = sum(r["status"] == "pass" for r in rows)
        title = f"Part A: solution notebooks at SMOKE=True, DEVICE=\"{device}\""
        write_recorded(part_a_file, {"what": title, "summary": [f"{passed} of {len(rows)} notebooks passed"],
                                     "workers": args.workers, "rows": rows},
                       provenance(device, "python tools/gpu_check.py --only notebooks"
                                  + (" --dry-run" if args.dry_run else "")))
        (part_a_file.parent / "part_a.md").write_text(markdown_table(rows, title))
        failed = [r["notebook"] for r in rows if r["status"] != "pass"]
        return {"notebooks": {"status": "pass" if not failed else "fail", "seconds": round(time.monotonic() - start, 1),
                              "error": f"{len(failed)} not passed: {', '.join(failed)}" if failed else None}}

    def recorders(days: list[str]) -> dict[str, dict]:
        print(f"Day recorders: {', '.join(days)}", flush=True)
        return run_recorders(days, bundle, device, args.dry_run, deadline, work, env, publish)

    def benchmark(name: str) -> dict[str, dict]:
        budget = budgets[name]
        if not args.dry_run and left() < budget:
            why = "its budget did not fit in what was left of the kit's time budget"
            print(f"  not run  {0:6.1f} s  {name}  <- {why}", flush=True)
            return {name: {"status": "not run", "seconds": 0.0, "error": why}}
        r = run_benchmark(name, bundle, device, args.dry_run, min(part_limit(budget, args.dry_run), max(1.0, left())),
                          work, env)
        print(f"  {r['status']:<8} {r['seconds']:6.1f} s  {name}" + (f"  <- {r['error']}" if r["error"] else ""),
              flush=True)
        return {name: r}

    tasks, optional = [], []
    days = [p for p in parts if p in RECORDERS]
    for name in parts:
        if name in OPTIONAL_BUDGET_S:
            optional.append(lambda name=name: benchmark(name))
        elif name in BENCHMARK_BUDGET_S:
            tasks.append(lambda name=name: benchmark(name))
        elif name == "notebooks":
            tasks.append(part_a)
        elif days and name == days[0]:
            tasks.append(lambda: recorders(days))

    def run_one(task) -> None:
        out = task()
        with lock:
            results.update(out)
        publish()

    if args.dry_run:   # toy sizes check code paths, not speed: the parts side by side keep the test short
        with ThreadPoolExecutor(max_workers=len(tasks) or 1) as pool:
            list(pool.map(run_one, tasks))
    else:              # on the GPU one after another, so that none disturbs another's measurements
        for task in tasks:
            run_one(task)
    for task in optional:                  # after the required parts (gpu_reference_extra appends to their file)
        run_one(task)
    publish()
    rows = load_recorded_file(kit_file)["rows"]
    total = time.monotonic() - kit_start
    ok = all(r["status"] in PASSED for r in rows if not r.get("optional"))
    print(f"\n{'part':<20} {'status':<8} {'seconds':>8} {'budget':>7}")
    for r in rows:
        print(f"{r['part']:<20} {r['status']:<8} {r['seconds']:>8.1f} {r['budget_s']:>7.0f}"
              + ("  (optional)" if r.get("optional") else ""))
    size = dest.stat().st_size if dest.exists() else 0
    print(f"total {total:.0f} s; bundle {dest} ({size / 2**20:.2f} MiB). "
          + ("All required parts passed." if ok else "Rerun what did not pass: python tools/gpu_check.py --only failed"))
    return 0 if ok else 1


def print_parts(time_budget: float) -> None:
    from gpu_check.recorders import RECORDERS

    whats = {"gpu_reference": "ResNet50 224 px, batch 256: channels_last+bf16, bf16, TF32; cudnn.benchmark on",
             "loop_overhead": "the course loop vs a bare loop, ResNet50 224 px bf16 on CUDA",
             "input_path": "host CPU per image: JPEG decoding vs the decoded cache",
             "notebooks": "Part A: every solution notebook at SMOKE=True, DEVICE=cuda, 4 at once, day09 alone",
             "gpu_reference_extra": "gpu_reference's torch.compile and IEEE fp32 rows"}
    required = all_parts(optional=False)
    print(f"{'part':<20} {'budget':>7}  what (in running order)")
    for name, budget in all_parts().items():
        what = whats.get(name) or RECORDERS[name].what
        print(f"{name:<20} {budget:5.0f} s  {textwrap.shorten(what, 90, placeholder=' ...')}"
              + ("  [optional]" if name in OPTIONAL_BUDGET_S else ""))
    print(f"one call: the required parts add up to {sum(required.values()):.0f} s, within the kit's --time-budget "
          f"of {time_budget:.0f} s, benchmarks first; the optional parts run only if that budget still holds them. "
          "With the wheel install (about 30 s) the device command needs timeout_s=590.")


def main(argv: list[str] | None = None) -> int:
    from gpu_check import wheels
    from gpu_check.notebooks import DEFAULT_WORKERS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="the CUDA device to check (default cuda)")
    ap.add_argument("--only", help="comma-separated parts to run (see --list), or 'failed'")
    ap.add_argument("--notebooks", help="Part A on these days only (e.g. day05,day07), or 'all' (in the dry run too)")
    ap.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="notebooks at once in Part A (default 4)")
    ap.add_argument("--notebooks-budget", type=float, help="seconds for Part A (default 140; the rehearsal: more)")
    ap.add_argument("--notebook-limit", type=float, help="seconds for one notebook (default 90, dry run 600)")
    ap.add_argument("--time-budget", type=float, default=TOTAL_BUDGET_S, help="seconds for the whole kit")
    ap.add_argument("--work", help="work folder (default build/gpu_check; a temp folder with --dry-run)")
    ap.add_argument("--bundle", help="where to write the bundle (default <work>/gpu_check_bundle.tar.gz)")
    ap.add_argument("--resume", type=Path, metavar="BUNDLE",
                    help="start from an earlier bundle (with --only failed on a fresh machine)")
    ap.add_argument("--dry-run", action="store_true", help="on the CPU: one notebook, every recorder at toy size")
    ap.add_argument("--wheels", type=Path, help="install the carried wheels this machine lacks (offline) first")
    ap.add_argument("--site", type=Path,
                    help="where --wheels installs (default: <--work>/site, else build/gpu_check/site)")
    ap.add_argument("--resolve-wheels", action="store_true", help="rewrite the wheel list (needs PyPI and PY312)")
    ap.add_argument("--download-wheels", type=Path, metavar="DIR", help="download the kit's wheels into DIR")
    ap.add_argument("--unpack", type=Path, metavar="BUNDLE", help="extract a bundle into this checkout")
    ap.add_argument("--list", action="store_true", help="print the parts and their budgets")
    ap.add_argument("--worker-recorders", help=argparse.SUPPRESS)
    ap.add_argument("--worker-bundle", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--worker-status", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--worker-tiny", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-deadline", type=float, default=math.inf, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.resolve_wheels:
        return wheels.resolve(os.environ.get("PY312", "python3.12"))
    if args.download_wheels:
        return wheels.download(args.download_wheels)
    if args.unpack:
        for path in unpack_bundle(args.unpack):
            print("wrote", path.relative_to(REPO))
        return 0
    if args.list:
        print_parts(args.time_budget)
        return 0
    if args.worker_recorders:
        return worker_recorders(args.worker_recorders.split(","), args.worker_bundle, args.worker_status,
                                args.device, args.worker_tiny, args.worker_deadline)
    if args.wheels:
        site = args.site or (Path(args.work) if args.work else REPO / "build" / "gpu_check") / "site"
        wheels.install(args.wheels, site)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # a stopped kit still runs its finally blocks
    return run_kit(args)


if __name__ == "__main__":
    sys.exit(main())
