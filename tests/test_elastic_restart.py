"""A multi-node job that survives a failure, for real, on one machine (Day 18, section 10).

Two torchrun agents (two "nodes", ``--nnodes=2``) meet at a c10d rendezvous on 127.0.0.1 and run
``utils.elastic_train`` with gloo. One worker sends itself SIGKILL in the middle of step 6; torchrun
(``--max-restarts``) restarts the whole worker group on both nodes, every worker resumes from the snapshot rank 0
wrote after step 4 (Day 26's checkpoint format), and the job ends with exactly the weights of an uninterrupted run.

Deterministic by construction, not by luck:
- the kill is injected at a fixed step, once per job (a marker file written before the kill);
- the snapshot it resumes from is fixed: rank 0 writes the step-4 snapshot before step 4's gradient all-reduce,
  which the killed rank completed, and it cannot finish step 6 without the killed rank, so no later snapshot exists;
- the data of a step is a function of the step alone, and one gloo thread per process sums the same two gradients;
- ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: by default torch 2.14's agents share their rendezvous store with the
  workers across restarts, and a restarted rank can read the *dead* rank's gloo address from the previous attempt
  ("Connection refused", then one more restart; pytorch/pytorch#135712). Reproduced here under load; with the
  variable set, each attempt's rank 0 hosts a fresh store;
- which agent notices first is a race (the node that lost its worker counts a restart; the other node either counts
  one too, when its own worker failed on the broken connection, or restarts for the membership change without
  counting), so the tests check what must hold either way and never a count on the other node.
"""
from __future__ import annotations

import pytest
import torch

import utils.elastic_train as elastic
from utils.elastic_train import EVENTS, FAULT_MARKER, SNAPSHOT, WEIGHTS, read_events, step_indices, train
from utils.launch import (agent_decisions, attempt_logs, run_elastic_nodes, run_torchrun_nodes,
                          torchrun_node_command)
from utils.processes import run_processes

STEPS, SNAPSHOT_EVERY, FAIL_AT = 12, 4, 6
JOB_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "LOGLEVEL": "INFO"}
TIMEOUT_S = 420          # a loaded 2-core machine took up to 90 s for the whole job; nothing here waits for it


def _args(out, fail_at: int = -1) -> list[str]:
    return ["--out", str(out), "--steps", str(STEPS), "--snapshot-every", str(SNAPSHOT_EVERY),
            "--fail-at-step", str(fail_at), "--timeout", "120"]


def _weights(out) -> dict[str, torch.Tensor]:
    return torch.load(out / WEIGHTS, map_location="cpu", weights_only=True)["model"]


def _reference(out) -> dict[str, torch.Tensor]:
    """The uninterrupted run: the same training function in a 2-process gloo group (no torchrun: nothing fails)."""
    run_processes(lambda rank, world: train(out, steps=STEPS, snapshot_every=SNAPSHOT_EVERY), 2, timeout_s=180)
    return _weights(out)


def test_node_command_is_what_every_node_runs():
    cmd = torchrun_node_command("train.py", 2, 4, ["--epochs", "1"], endpoint="10.0.0.1:29500", run_id="job7",
                                max_restarts=3, hosts_store=False, python="py")
    assert cmd == ["py", "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=4", "--rdzv-backend=c10d",
                   "--rdzv-endpoint=10.0.0.1:29500", "--rdzv-id=job7", "--max-restarts=3", "--rdzv-conf=is_host=0",
                   "train.py", "--epochs", "1"]
    module = torchrun_node_command("utils.elastic_train", 2, 1, endpoint="h:1", run_id="j", module=True)
    assert module[-2:] == ["-m", "utils.elastic_train"] and not any(a.startswith("--rdzv-conf") for a in module)


def test_attempt_logs_keep_every_attempt_in_order(tmp_path):
    for attempt, rank, text in [(1, 0, "second"), (0, 1, "first r1"), (0, 0, "first r0")]:
        folder = tmp_path / "job_abc" / f"attempt_{attempt}" / str(rank)
        folder.mkdir(parents=True)
        (folder / "stdout.log").write_text(text)
    assert attempt_logs(tmp_path) == {0: {0: "first r0", 1: "first r1"}, 1: {0: "second"}}


def test_agent_decisions_keep_the_restart_lines_with_their_time():
    log = ("I1202 04:22:23.800000 2532 torch/distributed/elastic/agent/server/api.py:962] [default] Detected 1 new "
           "nodes from group_rank=0; will restart worker group\n"
           "I1202 04:22:23.900000 2532 torch/distributed/elastic/agent/server/api.py:707] [default] Rendezvous'ing "
           "worker group\n"
           "E1202 04:22:22.946000 2533 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) "
           "local_rank: 0 (pid: 2648) of binary: python\n"
           "I1202 04:22:25.931000 2533 torch/distributed/elastic/agent/server/api.py:553]   restart_count=1\n"
           "  a continuation line without a header\n")
    got = agent_decisions(log)
    assert [m for _, m in got] == ["[default] Detected 1 new nodes from group_rank=0; will restart worker group",
                                   "failed (exitcode: -9) local_rank: 0 (pid: 2648) of binary: python",
                                   "rendezvous round complete: restart_count=1"]
    assert got[0][0] == 4 * 3600 + 22 * 60 + 23.8


def test_step_data_depends_on_the_step_alone():
    a, b = step_indices(9, 32, 100), step_indices(9, 32, 100)
    assert torch.equal(a, b) and len(a) == 32
    epoch0 = torch.cat([step_indices(s, 32, 100) for s in range(3)])
    assert len(set(epoch0.tolist())) == 96, "one epoch's steps never repeat a sample"
    assert not torch.equal(step_indices(0, 32, 100), step_indices(3, 32, 100)), "each epoch is reshuffled"


@pytest.mark.slow
def test_resume_from_a_snapshot_gives_the_uninterrupted_weights(tmp_path):
    """In one process group (fork, no torchrun): stop after 8 steps (last snapshot: step 4), rerun to the end."""
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    run_processes(lambda r, w: train(whole, steps=STEPS, snapshot_every=SNAPSHOT_EVERY), 2, timeout_s=180)
    run_processes(lambda r, w: train(resumed, steps=8, snapshot_every=SNAPSHOT_EVERY), 2, timeout_s=180)
    run_processes(lambda r, w: train(resumed, steps=STEPS, snapshot_every=SNAPSHOT_EVERY), 2, timeout_s=180)
    starts = [e["resumed_from"] for e in read_events(resumed) if e["event"] == "start"]
    assert starts == [0, 0, 4, 4], starts
    a, b = _weights(whole), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a), "a resumed run must end with the uninterrupted weights"


@pytest.mark.slow
def test_two_nodes_survive_a_sigkill_and_end_with_the_uninterrupted_weights(tmp_path):
    out = tmp_path / "job"
    job = run_torchrun_nodes("utils.elastic_train", 2, 1, _args(out, FAIL_AT), module=True, max_restarts=3,
                             timeout_s=TIMEOUT_S, env=JOB_ENV, log_dir=tmp_path / "logs")
    job.check()
    events = read_events(out)
    kills = [e for e in events if e["event"] == "killed"]
    starts = [e for e in events if e["event"] == "start"]
    assert len(kills) == 1 and kills[0]["step"] == FAIL_AT and (out / FAULT_MARKER).exists(), kills
    # Two workers started, one died; torchrun started two new ones, and both resumed from the step-4 snapshot.
    assert [s["resumed_from"] for s in starts] == [0, 0, SNAPSHOT_EVERY, SNAPSHOT_EVERY], starts
    assert len({s["pid"] for s in starts}) == 4 and kills[0]["pid"] in {s["pid"] for s in starts[:2]}
    assert sorted(s["rank"] for s in starts[2:]) == [0, 1] and all(s["world_size"] == 2 for s in starts)
    assert sum(e["event"] == "finished" for e in events) == 2
    # The node whose worker was killed saw the failure and counted a restart (its worker's second attempt).
    dead_node = kills[0]["pid"]
    lost = [i for i, node in enumerate(job.nodes) if f"(pid: {dead_node})" in node.stderr]
    assert len(lost) == 1, "exactly one agent reports the killed worker"
    agent_log = job.nodes[lost[0]].stderr
    assert "failed (exitcode: -9)" in agent_log and "will restart worker group" in agent_log
    assert 1 in job.attempts[lost[0]], "the restarted worker writes its output as attempt 1"
    agent = next(s["agent"] for s in starts if s["pid"] == dead_node)        # the killed worker's torchrun
    assert agent == job.nodes[lost[0]].pid
    assert [s["restart_count"] for s in starts[2:] if s["agent"] == agent] == [1], "its new worker is attempt 1"
    # The result: exactly the weights of the uninterrupted run.
    got, want = _weights(out), _reference(tmp_path / "reference")
    assert all(torch.equal(got[k], want[k]) for k in want), "the restarted job must end with the uninterrupted weights"
    assert not (tmp_path / "reference" / FAULT_MARKER).exists() and (out / SNAPSHOT).exists() and (out / EVENTS).exists()


@pytest.mark.slow
def test_without_max_restarts_the_same_failure_ends_the_job(tmp_path):
    out = tmp_path / "job"
    job = run_torchrun_nodes("utils.elastic_train", 2, 1, _args(out, FAIL_AT), module=True, max_restarts=0,
                             timeout_s=TIMEOUT_S, env=JOB_ENV)
    assert not job.timed_out and not job.ok
    events = read_events(out)
    assert [e["event"] for e in events].count("killed") == 1
    assert not any(e["event"] == "finished" for e in events) and not (out / WEIGHTS).exists()
    assert not any(e["event"] == "start" and e["resumed_from"] > 0 for e in events), "nobody restarted"


def test_forked_agents_refuse_once_cuda_is_initialised(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="run_torchrun_nodes"):
        run_elastic_nodes(elastic.worker, (str(tmp_path),), max_restarts=1)


@pytest.mark.slow
def test_forked_agents_run_the_same_restart(tmp_path):
    """What Day 18's notebook runs: torchrun's agents (elastic_launch) forked from this process, fork-started workers."""
    out = tmp_path / "job"
    job = run_elastic_nodes(elastic.worker, (str(out), STEPS, SNAPSHOT_EVERY, FAIL_AT, 1, 120.0), nnodes=2,
                            max_restarts=3, timeout_s=TIMEOUT_S, env=JOB_ENV, log_dir=tmp_path / "logs")
    job.check()
    events = read_events(out)
    assert [e["resumed_from"] for e in events if e["event"] == "start"] == [0, 0, SNAPSHOT_EVERY, SNAPSHOT_EVERY]
    assert sum(e["event"] == "killed" for e in events) == 1
    lost = [n for n in job.nodes if "failed (exitcode: -9)" in n.stderr]
    assert len(lost) == 1 and "will restart worker group" in lost[0].stderr
    assert any("restart_count=1" in m for _, m in agent_decisions(lost[0].stderr))
    got, want = _weights(out), _reference(tmp_path / "reference")
    assert all(torch.equal(got[k], want[k]) for k in want)


def _print_rank() -> None:
    import os
    print("rank", os.environ["RANK"])


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["forked agents", "torchrun command"])
def test_a_rendezvous_port_taken_before_node_0_binds_it_is_replaced(monkeypatch, tmp_path, launcher):
    # free_port() releases the port; if another process takes it first, node 0's agent cannot host the store and
    # the other agent would wait for it until timeout_s. The agents are stopped at once and start on a new port.
    import socket

    import utils.launch as L

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    handed: list[int] = []
    real = L.free_port
    monkeypatch.setattr(L, "free_port", lambda: handed.append(real() if handed else taken.getsockname()[1])
                        or handed[-1])
    script = tmp_path / "print_rank.py"
    script.write_text("import os\nprint('rank', os.environ['RANK'])\n")
    try:
        if launcher == "forked agents":
            job = run_elastic_nodes(_print_rank, nnodes=2, timeout_s=120, log_dir=tmp_path / "logs")
        else:
            job = run_torchrun_nodes(script, nnodes=2, timeout_s=120, log_dir=tmp_path / "logs")
    finally:
        taken.close()
    assert len(handed) == 2, f"expected one retry on a new port, got ports {handed}"
    assert not job.timed_out and all(node.returncode == 0 for node in job.nodes), job.nodes[0].stderr
    ranks = sorted(line for node in job.nodes for out in node.rank_stdout.values() for line in out.splitlines())
    assert ranks == ["rank 0", "rank 1"]
