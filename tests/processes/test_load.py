"""Eight actors writing at once under SampleToInsertRatio, then SIGTERM for every binary."""

import os
import re
import signal

import portpicker
import pytest
import reverb
from support.processes import DEADLINE_S, read, start, stop, wait_all, wait_for_log

import sac_distributed  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
from sac_distributed import replay

pytestmark = pytest.mark.slow

NUM_ACTORS = 8
STEPS_PER_ACTOR = 1000
K = 1  # transitions per replay item, set below for every job
SHARED = [
    "--env_name=Pendulum-v1",
    "--num_iterations=1000000",  # never reached: the learner is stopped with SIGTERM
    "--initial_collect_steps=200",
    "--batch_size=32",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
    "--samples_per_insert=1",  # inserts and samples hold each other back
    f"--transitions_per_item={K}",
    "--eval_interval=500",
    "--num_eval_episodes=1",
]


def _count(log: str, name: str) -> int:
    """`name`=N from the actor's final ActorStats line."""
    match = re.search(rf"{name}=(\d+)", log)
    assert match, f"no {name} in the actor's log:\n{log[-2000:]}"
    return int(match.group(1))


def test_eight_actors_lose_nothing_and_every_binary_stops_cleanly_on_sigterm(tmp_path):
    root = str(tmp_path)
    port = portpicker.pick_unused_port()
    address = f"localhost:{port}"
    shared = [f"--root_dir={root}", *SHARED]
    clients = shared + [
        f"--replay_buffer_server_address={address}",
        f"--variable_container_server_address={address}",
        "--connect_timeout=600",
    ]
    log = lambda name: os.path.join(root, f"{name}.log")  # noqa: E731
    server_flags = [f"--port={port}", "--stats_interval=5", "--replay_checkpoint_interval=0"]
    server = start("reverb_server", shared + server_flags, log("server"))
    learner = start("learner", clients + ["--checkpoint_interval=100000"], log("learner"))
    evaluator = start("evaluator", clients, log("evaluator"))
    actors = {
        f"actor_{i}": start(
            "actor",
            clients + [f"--task={i}", f"--max_env_steps={STEPS_PER_ACTOR}"],
            log(f"actor_{i}"),
        )
        for i in range(NUM_ACTORS)
    }
    everything = {"server": server, "learner": learner, "evaluator": evaluator, **actors}
    try:
        # One actor is stopped with SIGTERM while it writes.
        wait_for_log(
            log("actor_7"), r"switching from random|Actor 7: \d+ env steps", DEADLINE_S, actors
        )
        actors["actor_7"].send_signal(signal.SIGTERM)
        codes = wait_all(actors, DEADLINE_S)
        assert codes == {name: 0 for name in actors}, codes

        logs = {n: read(log(n)) for n in actors}
        written = {n: _count(text, "transitions_written") for n, text in logs.items()}
        unconfirmed = {n: _count(text, "transitions_unconfirmed") for n, text in logs.items()}
        dropped = {n: _count(text, "transitions_dropped") for n, text in logs.items()}
        for i in range(NUM_ACTORS - 1):
            assert "stopping (max_env_steps reached)" in read(log(f"actor_{i}"))
        assert "stopping (stop signal)" in read(log("actor_7"))
        info = reverb.Client(address).server_info(timeout=60)[replay.REPLAY_TABLE]
        inserted = info.rate_limiter_info.insert_stats.completed
        # Nothing lost between eight concurrent writers and the table: what the
        # actors report as confirmed landed, and whatever else landed was
        # reported as unconfirmed, never as dropped (dropped = the rows of an
        # incomplete last item, fewer than K, which are never sent).
        assert sum(written.values()) <= inserted, (written, inserted)
        assert inserted <= sum(written.values()) + sum(unconfirmed.values()), (
            written,
            unconfirmed,
            inserted,
        )
        assert all(d < K for d in dropped.values()), dropped
        print(
            f"[figure] {NUM_ACTORS} actors: {sum(written.values())} transitions confirmed, "
            f"{sum(unconfirmed.values())} unconfirmed, "
            f"{info.rate_limiter_info.insert_stats.completed} inserted, "
            f"{info.rate_limiter_info.sample_stats.completed} sampled under the ratio limiter"
        )
        # The learner sampled under the ratio limiter while the actors wrote.
        assert info.rate_limiter_info.sample_stats.completed > 0

        # Now SIGTERM each remaining binary: each exits 0 after its final work.
        mark = len(read(log("learner")))
        assert stop(learner) == 0, read(log("learner"))[-3000:]
        learner_log = read(log("learner"))[mark:]
        step = int(re.search(r"Learner stopped at train_step (\d+): stop signal", learner_log)[1])
        assert step > 0
        assert os.path.exists(os.path.join(root, "train", "checkpoints", f"ckpt-{step}.index"))
        assert stop(evaluator) == 0, read(log("evaluator"))[-3000:]
        mark = len(read(log("server")))
        assert stop(server) == 0, read(log("server"))[-3000:]
        assert "Replay checkpoint written" in read(log("server"))[mark:]
    finally:
        for proc in everything.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
