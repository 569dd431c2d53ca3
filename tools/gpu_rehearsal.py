#!/usr/bin/env python3
"""Rehearse the GPU check kit on the GPU machine's software, on this CPU, in one command (`make gpu-rehearsal`):

1. An environment like the GPU machine's image, outside the checkout (``$GPU_REHEARSAL_DIR``, default
   ``~/.cache/gpu-bootcamp/gpu-rehearsal``): Python 3.12 (``$PY312``, else pyenv's newest 3.12, else
   ``python3.12`` on the PATH), torch 2.11.0 + torchvision 0.26.0 from PyPI and the image's other packages the
   course uses (``tools/gpu_check/device_image.txt``). Built once (several GB), rebuilt only when that file changes.
2. The carried wheels (``tools/gpu_check_wheels.txt``) fetched into ``build/gpu_wheels``, again only when the list
   changes: the folder the device call carries.
3. Under that Python, exactly as on the GPU machine: the kit installs the wheels the environment lacks with
   ``pip install --no-deps --no-compile --target`` and runs with them on ``PYTHONPATH``; first its dry run (every
   part at toy size), then Part A with every notebook at ``DEVICE="cpu"``, ``SMOKE=True``.

It prints each step's result and a table of every notebook (pass/fail, seconds), writes it all to
``<dir>/last_rehearsal.json``, and exits non-zero when anything failed. With ``--write-order`` it also writes the
notebooks' seconds to ``tools/gpu_check/notebook_seconds.json``, the longest-first order Part A carries to the GPU.
Run it niced on a shared machine: ``nice -n 10 python3 tools/gpu_rehearsal.py``.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMAGE_FILE = REPO / "tools" / "gpu_check" / "device_image.txt"
WHEEL_LIST = REPO / "tools" / "gpu_check_wheels.txt"
WHEELS = REPO / "build" / "gpu_wheels"
ORDER_FILE = REPO / "tools" / "gpu_check" / "notebook_seconds.json"
QUIET = ["--quiet", "--disable-pip-version-check"]


def python312() -> str:
    """A working CPython 3.12: ``$PY312``, else the newest of pyenv's 3.12 versions, else ``python3.12`` on the PATH
    (a pyenv shim there may not run: each candidate is tried)."""
    pyenv = glob.glob(os.path.expanduser("~/.pyenv/versions/3.12.*/bin/python"))
    newest_first = sorted(pyenv, key=lambda p: [int(n) for n in re.findall(r"3\.12\.(\d+)", p)[-1:]], reverse=True)
    candidates = [os.environ.get("PY312"), *newest_first, shutil.which("python3.12")]
    for found in filter(None, candidates):
        probe = subprocess.run([found, "-c", "import sys; sys.exit(sys.version_info[:2] != (3, 12))"],
                               capture_output=True)
        if probe.returncode == 0:
            return found
    sys.exit("no Python 3.12 found: set PY312=/path/to/python3.12 (pyenv install 3.12 provides one)")


def digest(*paths: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()[:16]


def step(title: str, cmd: list[str], log: Path, **kw) -> tuple[int, float]:
    """Run ``cmd`` with its output in ``log`` (and its last lines on failure); ``(return code, seconds)``."""
    print(f"== {title}", flush=True)
    start = time.monotonic()
    with open(log, "w") as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, **kw).returncode
    seconds = time.monotonic() - start
    print(f"   {'ok' if rc == 0 else f'FAILED (exit {rc})'} in {seconds:.0f} s; log: {log}", flush=True)
    if rc != 0:
        print("   " + "\n   ".join(log.read_text().splitlines()[-25:]), flush=True)
    return rc, seconds


def build_env(base: Path, logs: Path) -> tuple[Path, int, float]:
    """The image-like environment: ``(its python, return code, seconds)``; reused while device_image.txt is unchanged."""
    venv = base / "venv"
    python = venv / "bin" / "python"
    stamp = venv / f".image-{digest(IMAGE_FILE)}"
    if stamp.exists():
        print(f"== environment: {venv} is up to date with {IMAGE_FILE.relative_to(REPO)}", flush=True)
        return python, 0, 0.0
    shutil.rmtree(venv, ignore_errors=True)
    rc, s1 = step(f"environment: Python 3.12 venv in {venv}", [python312(), "-m", "venv", str(venv)],
                  logs / "venv.log")
    if rc:
        return python, rc, s1
    rc, s2 = step("environment: the image's packages from PyPI (several GB, once)",
                  [str(python), "-m", "pip", "install", *QUIET, "-r", str(IMAGE_FILE)], logs / "image.log")
    if rc == 0:
        stamp.touch()
    return python, rc, s1 + s2


def fetch_wheels(python: Path, logs: Path) -> tuple[int, float]:
    stamp = WHEELS / f".list-{digest(WHEEL_LIST)}"
    if stamp.exists():
        print(f"== wheels: {WHEELS.relative_to(REPO)} is up to date with {WHEEL_LIST.relative_to(REPO)}", flush=True)
        return 0, 0.0
    rc, seconds = step("wheels: the carried closure for cp312 into build/gpu_wheels",
                       [str(python), str(REPO / "tools" / "gpu_check.py"), "--download-wheels", str(WHEELS)],
                       logs / "wheels.log", cwd=REPO)
    if rc == 0:
        for old in WHEELS.glob(".list-*"):
            old.unlink()
        stamp.touch()
    return rc, seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=Path(os.environ.get("GPU_REHEARSAL_DIR", "~/.cache/gpu-bootcamp/"
                                                                     "gpu-rehearsal")).expanduser())
    ap.add_argument("--workers", type=int, default=2, help="notebooks at once (default 2)")
    ap.add_argument("--notebooks", default="all", help="days to run (default all)")
    ap.add_argument("--skip-dry-run", action="store_true", help="only the notebooks")
    ap.add_argument("--write-order", action="store_true", help=f"write {ORDER_FILE.relative_to(REPO)}")
    args = ap.parse_args(argv)
    base = args.dir
    run = base / time.strftime("run-%Y%m%d-%H%M%S")
    logs = run / "logs"
    logs.mkdir(parents=True)
    summary: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "dir": str(run), "steps": {}}
    python, rc, seconds = build_env(base, logs)
    summary["steps"]["environment"] = {"rc": rc, "seconds": round(seconds)}
    if rc == 0:
        rc, seconds = fetch_wheels(python, logs)
        summary["steps"]["wheels"] = {"rc": rc, "seconds": round(seconds)}
    if rc:
        (base / "last_rehearsal.json").write_text(json.dumps(summary, indent=1))
        return rc
    probe = subprocess.run([str(python), "-c", "import sys, torch, torchvision; print(sys.version.split()[0], "
                            "torch.__version__, torchvision.__version__)"], capture_output=True, text=True)
    summary["software"] = probe.stdout.strip()
    print(f"== software: Python, torch, torchvision = {summary['software']}", flush=True)
    env = dict(os.environ, PYTHONPATH="")            # nothing of this checkout's own environment leaks in
    kit = [str(python), str(REPO / "tools" / "gpu_check.py"), "--wheels", str(WHEELS), "--site", str(run / "site")]
    if not args.skip_dry_run:
        rc, seconds = step("the kit's dry run (every part at toy size)",
                           kit + ["--dry-run", "--work", str(run / "dry"), "--bundle", str(run / "dry.tar.gz")],
                           logs / "dry_run.log", cwd=REPO, env=env)
        summary["steps"]["dry_run"] = {"rc": rc, "seconds": round(seconds)}
        kit_rows = run / "dry" / "bundle" / "results" / "gpu_check" / "kit.json"
        if kit_rows.exists():
            summary["dry_run_parts"] = {r["part"]: [r["status"], r["seconds"]]
                                        for r in json.loads(kit_rows.read_text())["rows"]}
    rc_nb, seconds = step(f"every notebook at DEVICE=\"cpu\", SMOKE=True, {args.workers} at a time",
                          kit + ["--dry-run", "--only", "notebooks", "--notebooks", args.notebooks, "--workers",
                                 str(args.workers), "--notebooks-budget", "14400", "--time-budget", "14400",
                                 "--notebook-limit", "1200",
                                 "--work", str(run / "notebooks"), "--bundle", str(run / "notebooks.tar.gz")],
                          logs / "notebooks.log", cwd=REPO, env=env)
    summary["steps"]["notebooks"] = {"rc": rc_nb, "seconds": round(seconds)}
    part_a = run / "notebooks" / "bundle" / "results" / "gpu_check" / "part_a.json"
    rows = json.loads(part_a.read_text())["rows"] if part_a.exists() else []
    summary["notebooks"] = rows
    print(f"\n{'notebook':<62} {'status':<8} {'seconds':>7}")
    for r in rows:
        print(f"{r['notebook']:<62} {r['status']:<8} {r['seconds']:>7.1f}" + (f"  {r['error'][:160]}"
                                                                              if r.get("error") else ""))
    passed = sum(r["status"] == "pass" for r in rows)
    dry = summary["steps"].get("dry_run")
    print(f"{passed} of {len(rows)} notebooks passed; dry run "
          + ("skipped" if dry is None else "passed" if dry["rc"] == 0 else "FAILED"))
    if args.write_order and rows:
        ORDER_FILE.write_text(json.dumps({
            "what": "seconds of each notebook at SMOKE=True, DEVICE=\"cpu\" under the GPU machine's software (the "
                    "rehearsal, tools/gpu_rehearsal.py; up to the failing cell for a notebook that failed): Part A "
                    "starts the longest first",
            "measured": summary["started"], "software": summary["software"],
            "seconds": {r["notebook"]: r["seconds"] for r in rows if r["status"] in ("pass", "fail")}},
            indent=1) + "\n")
        print(f"wrote {ORDER_FILE.relative_to(REPO)}")
    (base / "last_rehearsal.json").write_text(json.dumps(summary, indent=1))
    failed = any(s["rc"] for s in summary["steps"].values()) or passed < len(rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
