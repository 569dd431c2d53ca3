"""Day 26 · A production training loop: plausible correct answers that must keep full marks."""
from grader_alternatives import Alternative

_SCRIPT_HEAD = '''%%writefile {SCRIPT_PATH}
"""Train the recipe for --steps optimizer steps in CKPT_DIR; killed at any moment, run it again and it resumes."""
import argparse
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from resumable_recipe import BATCH_SIZE, SEED, build, train_step
from utils.checkpoint import ResumableSampler, atomic_save, load_checkpoint, restore_training_state, training_state


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt_dir")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--save-every", type=int, default=4)
    args = ap.parse_args()
    dataset, model, optimizer, scaler = build()
'''
_SCRIPT_TAIL = '''

if __name__ == "__main__":
    main()
'''

ALTERNATIVES = [
    Alternative(
        cell="day26_train_step",
        why="zeroes first, autocast only when asked (an if/else instead of enabled=), clips only parameters that have "
            "a gradient",
        source='''def train_step(model, images, targets, optimizer, scaler, loss_fn, max_grad_norm, amp_dtype=None):
    optimizer.zero_grad(set_to_none=True)
    if amp_dtype is None:
        loss = loss_fn(model(images), targets)
    else:
        with torch.autocast(device_type=images.device.type, dtype=amp_dtype):
            loss = loss_fn(model(images), targets)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    with_grads = [p for p in model.parameters() if p.grad is not None]
    grad_norm = torch.nn.utils.clip_grad_norm_(with_grads, max_norm=max_grad_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach(), grad_norm
'''),
    Alternative(
        cell="day26_train_step",
        why="measures the norm with get_total_norm and clips with clip_grads_with_norm_ (the two halves of "
            "clip_grad_norm_), zeroes through the model, returns the loss as float32",
        source='''def train_step(model, images, targets, optimizer, scaler, loss_fn, max_grad_norm, amp_dtype=None):
    model.zero_grad(set_to_none=True)
    with torch.autocast(images.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        outputs = model(images)
        loss = loss_fn(outputs, targets)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    total = torch.nn.utils.get_total_norm(grads)
    torch.nn.utils.clip_grads_with_norm_(model.parameters(), max_grad_norm, total)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach().float(), total
'''),
    Alternative(
        cell="day26_atomic_save",
        why="NamedTemporaryFile(delete=False) in the folder, torch.save by name, fsync through a second open, "
            "Path.replace, the folder opened with O_DIRECTORY",
        source='''import tempfile

def atomic_torch_save(obj, path):
    path = Path(path)
    tmp = tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name, suffix=".partial", delete=False)
    tmp.close()
    try:
        torch.save(obj, tmp.name)
        with open(tmp.name, "rb+") as f:
            os.fsync(f.fileno())
        Path(tmp.name).replace(path)
    except BaseException:
        if os.path.exists(tmp.name):
            os.remove(tmp.name)
        raise
    if os.name == "posix":
        dir_fd = os.open(str(path.parent), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
'''),
    Alternative(
        cell="day26_atomic_save",
        why="a fixed temporary name next to the target (path + '.tmp'), open() instead of mkstemp, cleanup in a "
            "finally that checks whether the file is still there",
        source='''import tempfile

def atomic_torch_save(obj, path):
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    done = False
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        done = True
    finally:
        if not done and tmp.exists():
            tmp.unlink()
    if os.name == "posix":
        fd = os.open(path.parent, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
'''),
    Alternative(
        cell="day26_resumable_script",
        why="the colleague's script with its four bugs fixed and its structure kept: its own checkpoint dict (RNG "
            "states added), atomic_save, a generator per loader, the position stored instead of recomputed",
        source=_SCRIPT_HEAD + '''    from utils.checkpoint import capture_rng_state, restore_rng_state

    ckpt_dir = Path(args.ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    last = ckpt_dir / "last.pt"
    step = epoch = consumed = 0
    if last.exists():
        state = load_checkpoint(last)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        restore_rng_state(state["rng"])
        step, epoch, consumed = state["step"], state["epoch"], state["consumed"]
    sampler = ResumableSampler(len(dataset), seed=SEED)
    model.train()
    while step < args.steps:
        sampler.set_epoch(epoch)
        sampler.skip(consumed)
        for images, targets in DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler,
                                          generator=torch.Generator().manual_seed(0)):
            train_step(model, optimizer, scaler, images, targets)
            step += 1
            consumed += len(targets)
            if step % args.save_every == 0:
                atomic_save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                             "scaler": scaler.state_dict(), "rng": capture_rng_state(), "step": step,
                             "epoch": epoch, "consumed": consumed}, last)
            if step == args.steps:
                break
        else:
            epoch, consumed = epoch + 1, 0
    atomic_save(training_state(model, optimizer, step=step, epoch=epoch, samples_in_epoch=consumed, scaler=scaler),
                ckpt_dir / "final.pt")''' + _SCRIPT_TAIL),
    Alternative(
        cell="day26_resumable_script",
        why="a hand-written atomic save (tempfile, fsync, os.replace), an epoch loop over itertools.count, the "
            "position counted per epoch, one fixed generator seed for every loader",
        source=_SCRIPT_HEAD + """    import itertools
    import os
    import tempfile

    def save(state, path):
        fd, tmp = tempfile.mkstemp(dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise

    out = Path(args.ckpt_dir)
    out.mkdir(parents=True, exist_ok=True)
    step, start_epoch, skip = 0, 0, 0
    if (out / "last.pt").exists():
        where = restore_training_state(load_checkpoint(out / "last.pt"), model, optimizer, scaler=scaler)
        step, start_epoch, skip = where["step"], where["epoch"], where["samples_in_epoch"]
    sampler = ResumableSampler(len(dataset), seed=SEED)
    model.train()
    for epoch in itertools.count(start_epoch):
        sampler.set_epoch(epoch)
        in_epoch = skip if epoch == start_epoch else 0
        sampler.skip(in_epoch)
        g = torch.Generator()
        g.manual_seed(1234)
        for images, targets in DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler, generator=g):
            train_step(model, optimizer, scaler, images, targets)
            step += 1
            in_epoch += len(targets)
            if step % args.save_every == 0:
                save(training_state(model, optimizer, step=step, epoch=epoch, samples_in_epoch=in_epoch,
                                    scaler=scaler), out / "last.pt")
            if step == args.steps:
                break
        if step == args.steps:
            break
    save(training_state(model, optimizer, step=step, epoch=epoch, samples_in_epoch=in_epoch, scaler=scaler),
         out / "final.pt")""" + _SCRIPT_TAIL),
    Alternative(
        cell="day26_train_step",
        why="autocast chosen with a conditional expression (nullcontext when amp_dtype is None), the norm of the "
            "parameters that have a gradient",
        source='''import contextlib

def train_step(model, images, targets, optimizer, scaler, loss_fn, max_grad_norm, amp_dtype=None):
    optimizer.zero_grad(set_to_none=True)
    autocast = (contextlib.nullcontext() if amp_dtype is None
                else torch.autocast(device_type=images.device.type, dtype=amp_dtype))
    with autocast:
        loss = loss_fn(model(images), targets)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], max_grad_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.detach(), norm
'''),
    Alternative(
        cell="day26_resumable_script",
        why="also writes a first checkpoint at step 0 on a fresh start, so that a crash before the first save resumes "
            "too: the j-th save is then the checkpoint of step (j - 1) x S",
        find="    sampler = ResumableSampler(len(dataset), seed=SEED)\n    model.train()\n",
        replace="    if not last.exists():                   # a first checkpoint, so that a crash before step S resumes too\n"
                "        atomic_save(training_state(model, optimizer, step=0, epoch=0, samples_in_epoch=0, scaler=scaler), last)\n"
                "    sampler = ResumableSampler(len(dataset), seed=SEED)\n    model.train()\n"),
]
