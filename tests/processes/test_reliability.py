"""Processes really killed with SIGKILL mid-run; the run must carry on and finish."""

import logging
import os
import re
import signal
import threading
import time

import numpy as np
import portpicker
import pytest
import reverb
from support.processes import DEADLINE_S, read, settled, start, stop, wait_all, wait_for_log

import sac_distributed  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
from sac_distributed import replay
from sac_distributed.retry import retry

pytestmark = pytest.mark.slow

NUM_ITERATIONS = 500
CHECKPOINT_INTERVAL = 100
SMALL = [
    "--env_name=Pendulum-v1",
    f"--num_iterations={NUM_ITERATIONS}",
    "--initial_collect_steps=200",
    "--batch_size=32",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
    "--eval_interval=250",
    "--num_eval_episodes=1",
    "--policy_save_interval=500",
    "--samples_per_insert=0",  # actors run free: they keep collecting while the learner is down
]


class Run:
    """One topology on localhost with its flags, logs and processes."""

    def __init__(self, root: str):
        self.root = root
        self.port = portpicker.pick_unused_port()
        self.address = f"localhost:{self.port}"
        self.shared = [f"--root_dir={root}", *SMALL]
        self.client_flags = self.shared + [
            f"--replay_buffer_server_address={self.address}",
            f"--variable_container_server_address={self.address}",
            "--connect_timeout=600",
        ]
        self.procs = {}

    def log(self, name: str) -> str:
        return os.path.join(self.root, f"{name}.log")

    def start_server(self):
        flags = [f"--port={self.port}", "--stats_interval=5", "--replay_checkpoint_interval=2"]
        self.procs["server"] = start("reverb_server", self.shared + flags, self.log("server"))

    def start_learner(self):
        flags = [f"--checkpoint_interval={CHECKPOINT_INTERVAL}", "--summary_interval=50"]
        self.procs["learner"] = start("learner", self.client_flags + flags, self.log("learner"))

    def start_actor(self):
        flags = ["--task=0", "--variable_update_interval=100"]
        self.procs["actor"] = start("actor", self.client_flags + flags, self.log("actor"))

    def start_evaluator(self):
        flags = ["--poll_interval=0.5"]
        self.procs["evaluator"] = start(
            "evaluator", self.client_flags + flags, self.log("evaluator")
        )

    def table(self):
        """The replay table's info, from a fresh client, waiting for the server."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                return reverb.Client(self.address).server_info(timeout=2)[replay.REPLAY_TABLE]
            except (reverb.errors.DeadlineExceededError, RuntimeError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def cleanup(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def jobs(tmp_path):
    r = Run(str(tmp_path))
    yield r
    r.cleanup()


def _last_int(pattern: str, text: str) -> int:
    values = [int(m) for m in re.findall(pattern, text)]
    assert values, f"{pattern!r} not found"
    return values[-1]


def test_server_learner_and_actor_killed_in_turn_and_the_run_finishes(jobs):
    """One run, three SIGKILLs: the server (replay restored from its checkpoint, the
    clients carry on against the new one), the learner (resumed from its checkpoint,
    at most one interval lost) and an actor (a new one rejoins). The learner is frozen
    across the server's restart and killed there, so a learner process reconnecting to a
    restarted server is tested by test_chaos.py (and in-process below). The actor is
    frozen (SIGSTOP) while the test waits on the learner alone: from the warm-up it wrote
    until the learner's first checkpoint, and from its writes to the restarted server
    until its kill."""
    jobs.start_server()
    jobs.start_learner()
    jobs.start_actor()
    jobs.start_evaluator()
    # Warm-up written: the learner trains on it while the actor waits frozen.
    wait_for_log(jobs.log("actor"), r"switching from random", DEADLINE_S, jobs.procs)
    os.kill(jobs.procs["actor"].pid, signal.SIGSTOP)
    wait_for_log(jobs.log("learner"), r"Saved checkpoint .*ckpt-\d+", DEADLINE_S, jobs.procs)
    wait_for_log(jobs.log("learner"), r"train_step \d+: loss", DEADLINE_S, jobs.procs)
    # Freeze the learner while it is under way: on a busy machine the checkpoint
    # below can take longer than all its train steps, and a learner that finished
    # before its kill could not show that it resumes.
    os.kill(jobs.procs["learner"].pid, signal.SIGSTOP)
    assert "Learner stopped" not in read(jobs.log("learner"))

    # The server: a replay checkpoint taken while training is under way, then SIGKILL.
    mark = len(read(jobs.log("server")))
    wait_for_log(jobs.log("server"), r"Replay checkpoint written", DEADLINE_S, start_at=mark)
    # Inserts stay frozen while the size is read: a checkpoint written between the read
    # and the kill must not hold more than was read.
    size_before = settled(lambda: jobs.table().current_size, "the replay size")
    jobs.procs["server"].kill()
    jobs.procs["server"].wait()
    jobs.start_server()
    restored_info = jobs.table()
    restored = restored_info.current_size
    samples_at_restart = restored_info.rate_limiter_info.sample_stats.completed
    assert 0 < restored <= size_before, (restored, size_before)
    print(f"[figure] server SIGKILL: {restored} of {size_before} replay items restored")

    # The learner, still frozen: SIGKILL. The actor keeps collecting while it is down,
    # and writes to the restarted server (by reconnecting, or through Reverb's own
    # stream retry when it never saw the outage).
    jobs.procs["learner"].kill()
    jobs.procs["learner"].wait()
    before = read(jobs.log("learner"))
    logged_step = _last_int(r"train_step (\d+): loss", before)
    saved_step = _last_int(r"ckpt-(\d+)", before)
    os.kill(jobs.procs["actor"].pid, signal.SIGCONT)
    deadline = time.monotonic() + DEADLINE_S
    while jobs.table().current_size < restored + 100:
        assert time.monotonic() < deadline, (
            f"waited {DEADLINE_S} s for the actor to write to the restarted server "
            "while the learner was down"
        )
        time.sleep(0.2)
    # Written: the actor waits frozen while the learner restarts, and is killed there.
    os.kill(jobs.procs["actor"].pid, signal.SIGSTOP)

    mark = len(before)
    jobs.start_learner()
    match = wait_for_log(
        jobs.log("learner"),
        r"Restored .*ckpt-(\d+) \(train_step=(\d+)\)",
        DEADLINE_S,
        start_at=mark,
    )
    resumed = int(match.group(2))
    assert resumed >= saved_step
    assert resumed >= logged_step - CHECKPOINT_INTERVAL  # at most one interval lost
    print(
        f"[figure] learner SIGKILL after train_step >= {logged_step}: resumed at {resumed} "
        f"(checkpoint_interval {CHECKPOINT_INTERVAL})"
    )

    # The actor, killed mid-episode, rejoins; its half-finished episode is simply absent.
    wait_for_log(jobs.log("learner"), r"train_step \d+: loss", DEADLINE_S, start_at=mark)
    jobs.procs["actor"].kill()
    jobs.procs["actor"].wait()
    jobs.start_actor()

    codes = wait_all({n: p for n, p in jobs.procs.items() if n != "server"}, DEADLINE_S)
    # The learner trained on the restarted server.
    assert jobs.table().rate_limiter_info.sample_stats.completed > samples_at_restart
    codes["server"] = stop(jobs.procs["server"])
    assert codes == {n: 0 for n in codes}, codes
    learner = read(jobs.log("learner"))[mark:]
    assert f"Learner stopped at train_step {NUM_ITERATIONS}: num_iterations reached" in learner
    # The restarted actor saw the restarted learner's final weights and done flag.
    assert "stopping (learner finished)" in read(jobs.log("actor"))
    rows = read(os.path.join(jobs.root, "eval", "results.csv")).strip().splitlines()
    assert rows[-1].startswith(f"{NUM_ITERATIONS},")
    policies = os.listdir(os.path.join(jobs.root, "policies"))
    assert {"policy", "collect_policy", "greedy_policy"} <= set(policies)


def _fill(address: str, count: int) -> None:
    # A server just started beside a training learner may take longer than one
    # server_info timeout to answer on a busy machine: retry until the deadline.
    client = replay.connect(address, DEADLINE_S, "the test's writer")
    writer = retry(lambda _: replay.TransitionWriter(client), replay.TRANSIENT_ERRORS, DEADLINE_S)
    for _ in range(count):
        obs = np.random.uniform(-1, 1, 3).astype(np.float32)
        writer.write(
            {
                replay.OBSERVATION: obs,
                replay.ACTION: np.random.uniform(-2, 2, 1).astype(np.float32),
                replay.REWARD: np.float32(-1.0),
                replay.DISCOUNT: np.float32(1.0),
                replay.NEXT_OBSERVATION: obs,
            }
        )
    writer.close()


def test_learner_in_process_recovers_when_its_server_goes_away(tmp_path, caplog, monkeypatch):
    """A server stopped in-process leaves the learner's dataset hanging: the guarded
    call must notice, reconnect to the new server and finish. The learner summarizes
    every 20 steps and keeps spares from step 20, so by the stop (step 50) it has spare
    functions traced ahead: the reconnect swaps them in instead of tracing again,
    although the abandoned call still runs the old ones (traced.py)."""
    import tensorflow as tf

    from sac_distributed import config as config_lib
    from sac_distributed.envs import loader as env_loader
    from sac_distributed.jobs import learner_loop
    from sac_distributed.jobs import watchdog as watchdog_lib
    from sac_distributed.jobs.learner_loop import LearnerLoop
    from sac_distributed.jobs.server import make_server
    from sac_distributed.replay.connection import Connection
    from sac_distributed.runtime import Metrics

    caplog.set_level(logging.INFO, logger="absl")
    # The hanging call is checked after 1 s, not 5 (the ping's own timeout stays):
    # the same detection, less waiting. A healthy call never lasts that long.
    monkeypatch.setattr(watchdog_lib, "HEALTH_CHECK_INTERVAL_S", 1.0)
    monkeypatch.setattr(learner_loop, "SPARES_FROM_STEP", 20)
    hparams = config_lib.hyperparams_for(
        "Pendulum-v1",
        dict(
            initial_collect_steps=64,
            batch_size=32,
            actor_fc_layer_params=(16, 16),
            critic_joint_fc_layer_params=(16, 16),
            num_iterations=300,
            policy_save_interval=300,
            samples_per_insert=0,
        ),
    )
    port = portpicker.pick_unused_port()
    address = f"localhost:{port}"
    server_config = config_lib.ServerConfig("Pendulum-v1", hparams, str(tmp_path), port=port)
    server = make_server(server_config, port)
    _fill(address, 300)
    config = config_lib.LearnerConfig(
        "Pendulum-v1",
        hparams,
        str(tmp_path),
        client=config_lib.ClientConfig(address, address, connect_timeout_s=DEADLINE_S),
        steps_per_call=10,
        variable_push_interval=50,
        summary_interval=20,
    )
    connection = Connection(config.client, "learner", lambda: False)
    connection.open()
    loop = LearnerLoop(
        config,
        env_loader.specs_for("Pendulum-v1"),
        tf.distribute.get_strategy(),
        connection,
        Metrics(None),
    )
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(result=loop.run()), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while loop.step < 50:
            assert time.monotonic() < deadline and thread.is_alive(), (
                f"waited {DEADLINE_S} s for 50 train steps"
            )
            time.sleep(0.2)
        server.stop()
        deadline = time.monotonic() + DEADLINE_S
        while "lost the Reverb server" not in caplog.text:
            assert time.monotonic() < deadline, (
                f"waited {DEADLINE_S} s for the learner to notice the lost server"
            )
            time.sleep(0.2)
        server = make_server(server_config, port)
        _fill(address, 300)
        thread.join(timeout=DEADLINE_S)
        assert not thread.is_alive(), (
            f"waited {DEADLINE_S} s for the learner to finish after the restart"
        )
    finally:
        server.stop()
    assert outcome["result"].train_step == 300
    assert outcome["result"].stop_reason == "num_iterations reached"
    assert re.search(
        r"after reconnecting \(update traced ahead; new iterator [\d.]+ s, "
        r"weights published [\d.]+ s\)",
        caplog.text,
    )
    assert re.search(
        r"Learner trained again up to train_step \d+, [\d.]+ s after resuming", caplog.text
    )
    assert connection.reconnects >= 1
