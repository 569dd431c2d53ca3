"""Day 26 · A production training loop: plausible wrong answers the hidden tests must catch."""
from grader_mutants import Mutant

MUTANTS = [
    Mutant(cell="day26_train_step",
           find="    scaler.step(optimizer)\n", replace="    optimizer.step()\n",
           why="stepped the optimizer directly: an inf gradient is applied instead of skipped",
           caught_by="day26_train_step_tests"),
    Mutant(cell="day26_train_step",
           find="    scaler.unscale_(optimizer)\n"
                "    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)\n",
           replace="    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)\n"
                   "    scaler.unscale_(optimizer)\n",
           why="clipped the scaled gradients (clip before unscale_)",
           caught_by="day26_train_step_tests"),
    Mutant(cell="day26_train_step",
           find="    optimizer.zero_grad(set_to_none=True)\n", replace="",
           why="never zeroed the gradients: the previous step's gradients accumulate",
           caught_by="day26_train_step_tests"),
    Mutant(cell="day26_train_step",
           find="    scaler.update()\n", replace="",
           why="never updated the scaler: the scale neither grows nor backs off",
           caught_by="day26_train_step_tests"),
    Mutant(cell="day26_train_step",
           find="return loss.detach(), grad_norm", replace="return loss.item(), grad_norm",
           why="returned loss.item(): a host sync every step",
           caught_by="day26_train_step_tests"),
    Mutant(cell="day26_atomic_save",
           find='suffix=".tmp", dir=path.parent)', replace='suffix=".tmp")',
           why="wrote the temporary file to the system's temp folder: os.replace fails (EXDEV) when that is another "
               "file system, and is never the same-folder rename the recipe needs",
           caught_by="day26_atomic_save_tests"),
    Mutant(cell="day26_atomic_save",
           find="        Path(tmp_name).unlink(missing_ok=True)\n", replace="",
           why="left the temporary file behind after a crash",
           caught_by="day26_atomic_save_tests"),
    Mutant(cell="day26_atomic_save",
           find="            torch.save(obj, f)\n", replace="            torch.save(obj, path)\n",
           why="saved straight over the checkpoint: a crash while writing destroys the previous one",
           caught_by="day26_atomic_save_tests"),
    Mutant(cell="day26_atomic_save",
           find="            os.fsync(f.fileno())\n", replace="",
           why="renamed before the data reached the disk (no fsync)",
           caught_by="day26_atomic_save_tests"),
    Mutant(cell="day26_resumable_script",
           find="        pos = restore_training_state(load_checkpoint(last), model, optimizer, scaler=scaler)\n",
           replace="        state = load_checkpoint(last)\n"
                   "        model.load_state_dict(state[\"model\"])\n"
                   "        optimizer.load_state_dict(state[\"optimizer\"])\n"
                   "        scaler.load_state_dict(state[\"scaler\"])\n"
                   "        pos = state\n",
           why="restored weights, optimizer and scaler but not the random generators",
           caught_by="day26_resumable_script_tests"),
    Mutant(cell="day26_resumable_script",
           find="restore_training_state(load_checkpoint(last), model, optimizer, scaler=scaler)",
           replace="restore_training_state(load_checkpoint(last), model, optimizer)",
           why="did not restore the GradScaler: the loss scale restarts from its initial value",
           caught_by="day26_resumable_script_tests"),
    Mutant(cell="day26_resumable_script",
           find="        sampler.skip(consumed)\n", replace="",
           why="restarted the interrupted epoch from its first batch",
           caught_by="day26_resumable_script_tests"),
    Mutant(cell="day26_resumable_script",
           find="sampler=sampler,\n                            generator=torch.Generator().manual_seed(SEED + epoch))",
           replace="sampler=sampler)",
           why="a DataLoader without its own generator: creating the iterator after a resume draws from the global RNG",
           caught_by="day26_resumable_script_tests"),
    Mutant(cell="day26_resumable_script",
           find="                atomic_save(training_state(model, optimizer, step=step, epoch=epoch, "
                "samples_in_epoch=consumed,\n                                           scaler=scaler), last)",
           replace="                torch.save(training_state(model, optimizer, step=step, epoch=epoch, "
                   "samples_in_epoch=consumed,\n                                          scaler=scaler), last)",
           why="checkpoints with torch.save straight to last.pt: a kill while writing leaves a truncated file",
           caught_by="day26_resumable_script_tests"),
    Mutant(cell="day26_resumable_script",
           find="            if step % args.save_every == 0:\n", replace="            if False:\n",
           why="saved only the final state: a killed run starts again from scratch",
           caught_by="day26_resumable_script_tests"),
    Mutant(cell="day26_atomic_save",
           find='''    if os.name == "posix":                   # the rename is an entry in the folder: flush the folder too
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
''', replace="",
           why="never flushed the folder: a power cut after the rename can bring the old checkpoint back",
           caught_by="day26_atomic_save_tests"),
    Mutant(cell="day26_atomic_save",
           find="        os.replace(tmp_name, path)\n"
                "    except BaseException:\n"
                "        Path(tmp_name).unlink(missing_ok=True)\n"
                "        raise\n"
                '    if os.name == "posix":                   # the rename is an entry in the folder: flush the folder too\n'
                "        folder = os.open(path.parent, os.O_RDONLY)\n"
                "        try:\n"
                "            os.fsync(folder)\n"
                "        finally:\n"
                "            os.close(folder)\n",
           replace="        folder = os.open(path.parent, os.O_RDONLY)\n"
                   "        os.fsync(folder)\n"
                   "        os.close(folder)\n"
                   "        os.replace(tmp_name, path)\n"
                   "    except BaseException:\n"
                   "        Path(tmp_name).unlink(missing_ok=True)\n"
                   "        raise\n",
           why="flushed the folder before the rename (and not after): the new name is still only in memory",
           caught_by="day26_atomic_save_tests"),
    Mutant(cell="day26_resumable_script",
           find='        step, epoch, consumed = pos["step"], pos["epoch"], pos["samples_in_epoch"]\n',
           replace='        step = pos["step"]\n'
                   '        steps_per_epoch = len(dataset) // BATCH_SIZE\n'
                   '        epoch, consumed = step // steps_per_epoch, step % steps_per_epoch * BATCH_SIZE\n',
           why="recomputed the data position from the step with len // BATCH_SIZE steps per epoch: wrong after an epoch "
               "whose last batch is short (the colleague's fourth bug)",
           caught_by="day26_resumable_script_tests"),
    Mutant(cell="day26_resumable_script",
           find="        else:\n            epoch, consumed = epoch + 1, 0\n",
           replace="        else:\n            epoch, consumed = divmod(step * BATCH_SIZE, len(dataset))\n",
           why="starts each new epoch where step * BATCH_SIZE falls, skipping samples after the short last batch: "
               "consistent in every run, so only a run of the rules catches it",
           caught_by="day26_resumable_script_tests"),
    Mutant(cell="day26_train_step",
           find="    with torch.autocast(images.device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):\n",
           replace="    if True:\n",
           why="never autocasts: amp_dtype is ignored and every step runs in fp32",
           caught_by="day26_train_step_tests"),
    Mutant(cell="day26_train_step",
           find="return loss.detach(), grad_norm", replace="return loss.detach(), grad_norm.item()",
           why="returns the gradient norm as a Python float: a host sync every step",
           caught_by="day26_train_step_tests"),
    Mutant(cell="day26_train_step",
           find="dtype=amp_dtype or torch.float32, ",
           replace="dtype=torch.bfloat16, ",
           why="autocasts to bf16 whatever amp_dtype says (only whether it is None is read)",
           caught_by="day26_train_step_tests"),
    Mutant(cell="day26_train_step",
           find="    optimizer.zero_grad(set_to_none=True)\n    with torch.autocast(images.device.type, "
                "dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):\n"
                "        loss = loss_fn(model(images), targets)\n",
           replace="    with torch.autocast(images.device.type, dtype=amp_dtype or torch.float32, "
                   "enabled=amp_dtype is not None):\n        loss = loss_fn(model(images), targets)\n"
                   "    optimizer.zero_grad(set_to_none=True)\n",
           why="zeroed the gradients after the forward pass: the stale ones stay allocated through it",
           caught_by="day26_train_step_tests"),
    Mutant(cell="day26_train_step", find="optimizer.zero_grad(set_to_none=True)",
           replace="optimizer.zero_grad(set_to_none=False)",
           why="zeroed the gradients in place instead of freeing them (set_to_none=False): a gradient's worth of "
               "zeros stays allocated through the forward pass",
           caught_by="day26_train_step_tests"),
    Mutant(cell="day26_train_step",
         find="        loss = loss_fn(model(images), targets)\n",
         replace="        out = model(images)\n    loss = loss_fn(out, targets)\n",
         why="computed the loss after leaving the autocast block: a 16-bit loss from 16-bit logits",
         caught_by="day26_train_step_tests"),
    Mutant(cell="day26_atomic_save",
           find="            os.fsync(f.fileno())\n        os.replace(tmp_name, path)\n    except BaseException:\n"
                "        Path(tmp_name).unlink(missing_ok=True)\n        raise\n",
           replace="            os.fsync(f.fileno())\n    except BaseException:\n        Path(tmp_name).unlink(missing_ok=True)\n"
                   "        raise\n    os.replace(tmp_name, path)\n",
           why="os.replace outside the try that deletes the temporary file: a failed rename leaves the .tmp behind",
           caught_by="day26_atomic_save_tests"),
    Mutant(cell="day26_train_step",
           find="        loss = loss_fn(model(images), targets)\n    scaler.scale(loss).backward()\n"
                "    scaler.unscale_(optimizer)\n"
                "    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)\n"
                "    scaler.step(optimizer)\n    scaler.update()\n",
           replace="        loss = loss_fn(model(images), targets)\n        scaler.scale(loss).backward()\n"
                   "        scaler.unscale_(optimizer)\n"
                   "        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)\n"
                   "        scaler.step(optimizer)\n        scaler.update()\n",
           why="the whole step runs under autocast: backward, clipping and the update belong outside the block",
           caught_by="day26_train_step_tests"),
    Mutant(cell='day26_train_step',
           find='torch.autocast(images.device.type,',
           replace='torch.autocast("cpu",',
           why='autocast hard-coded to the CPU: on a GPU the forward pass silently runs in fp32',
           caught_by='day26_train_step_tests'),
    Mutant(cell='day26_train_step',
           find='return loss.detach(), grad_norm',
           replace='return loss.detach().cpu(), grad_norm',
           why="returns the loss on the host: a blocking copy at every step on a GPU",
           caught_by='day26_train_step_tests'),
    Mutant(cell='day26_atomic_save',
           find='        folder = os.open(path.parent, os.O_RDONLY)\n        try:\n            os.fsync(folder)\n        finally:\n            os.close(folder)\n',
           replace='        folder = os.open(path.parent, os.O_RDONLY)\n        os.fsync(folder)\n',
           why="never closes the folder's descriptor: one leaked per checkpoint until 'Too many open files'",
           caught_by='day26_atomic_save_tests'),
    Mutant(cell='day26_atomic_save',
           find='        with os.fdopen(fd, "wb") as f:\n            torch.save(obj, f)\n            f.flush()\n            os.fsync(f.fileno())\n',
           replace='        torch.save(obj, tmp_name)\n        with open(tmp_name, "rb+") as f:\n            os.fsync(f.fileno())\n',
           why="saves by name and never closes mkstemp's own descriptor: one leaked per checkpoint",
           caught_by='day26_atomic_save_tests'),
    Mutant(cell='day26_train_step',
           find='return loss.detach(), grad_norm',
           replace='return loss.detach(), grad_norm.cpu()',
           why="returns the gradient norm on the host: a blocking copy at every step on a GPU, invisible on a CPU",
           caught_by='day26_train_step_tests'),
]
