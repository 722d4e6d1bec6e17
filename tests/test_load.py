"""Eight actors writing at once under SampleToInsertRatio, then SIGTERM for every binary."""

import os
import re
import signal

import portpicker
import pytest
import reverb
from proc_utils import DEADLINE_S, read, start, stop, wait_all, wait_for_log

import sac_distributed  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TF)
from sac_distributed import replay

pytestmark = pytest.mark.slow

NUM_ACTORS = 8
STEPS_PER_ACTOR = 1500
SHARED = [
    "--env_name=Pendulum-v1",
    "--num_iterations=1000000",  # never reached: the learner is stopped with SIGTERM
    "--initial_collect_steps=200",
    "--batch_size=32",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
    "--samples_per_insert=1",  # inserts and samples hold each other back
    "--eval_interval=500",
    "--num_eval_episodes=1",
]


def _transitions_written(log: str) -> int:
    match = re.search(r"transitions_written=(\d+)", log)
    assert match, log[-2000:]
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

        written = {n: _transitions_written(read(log(n))) for n in actors}
        for i in range(NUM_ACTORS - 1):
            assert "stopping (max_env_steps reached)" in read(log(f"actor_{i}"))
        assert "stopping (stop signal)" in read(log("actor_7"))
        info = reverb.Client(address).server_info(timeout=60)[replay.REPLAY_TABLE]
        # Nothing lost between eight concurrent writers and the table.
        assert info.rate_limiter_info.insert_stats.completed == sum(written.values()), written
        print(
            f"[figure] {NUM_ACTORS} actors: {sum(written.values())} transitions reported, "
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
