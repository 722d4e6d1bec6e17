"""ActorLoop in-process: rows of one or more envs, K per item, non-finite steps dropped."""

import numpy as np
import pytest
from support.training import ENV_NAME, small_hparams
from tf_agents.environments import wrappers

from sac_distributed import config as config_lib
from sac_distributed import replay
from sac_distributed.envs import loader as env_loader
from sac_distributed.jobs.actor_loop import ActorLoop
from sac_distributed.replay.connection import Connection
from sac_distributed.runtime import Metrics

K = 4
NAN_EVERY = 37


class NanRewardEvery(wrappers.PyEnvironmentBaseWrapper):
    """Returns a NaN reward on every `every`-th step."""

    def __init__(self, env, every: int):
        super().__init__(env)
        self._every = every
        self._steps = 0

    def _step(self, action):
        time_step = self._env.step(action)
        self._steps += 1
        if self._steps % self._every == 0:
            time_step = time_step._replace(reward=np.float32(np.nan))
        return time_step


@pytest.mark.parametrize("num_envs", [1, 2])
def test_actor_writes_k_row_items_and_drops_non_finite_steps(
    new_server, root_dir, env_specs, num_envs
):
    server = new_server(small_hparams(transitions_per_item=K, initial_collect_steps=0))
    address = f"localhost:{server.port}"
    client_config = config_lib.ClientConfig(address, address, connect_timeout_s=10.0)
    config = config_lib.ActorConfig(
        ENV_NAME,
        small_hparams(transitions_per_item=K, initial_collect_steps=0),
        root_dir,
        client=client_config,
        num_envs=num_envs,
        max_env_steps=202,
        seed=1,
    )
    envs = [NanRewardEvery(env_loader.load_env(ENV_NAME, 1), NAN_EVERY)]
    envs += [env_loader.load_env(ENV_NAME, 2 + i) for i in range(num_envs - 1)]
    connection = Connection(client_config, "test actor", lambda: False)
    connection.open()
    try:
        stats = ActorLoop(config, envs, connection, Metrics(None), lambda: False).run()
        info = replay.table_info(server.localhost_client(), replay.REPLAY_TABLE)
        samples = list(
            server.localhost_client().sample(
                replay.REPLAY_TABLE, num_samples=100, emit_timesteps=False
            )
        )
    finally:
        server.stop()

    assert stats.stop_reason == "max_env_steps reached"
    assert stats.env_steps == 202
    steps_of_first_env = 202 // num_envs
    assert stats.dropped_non_finite == steps_of_first_env // NAN_EVERY
    # Every finite step was written or (a partial last item) dropped, and the
    # table holds exactly what the actor reports as written.
    assert stats.transitions_written + stats.transitions_dropped == 202 - stats.dropped_non_finite
    assert stats.transitions_dropped < K
    assert stats.transitions_unconfirmed == 0  # the server confirmed every sent item
    assert info.current_size * K == stats.transitions_written
    layout = replay.row_layout(env_specs)
    for sample in samples:
        rows = np.asarray(sample.data[0])
        assert rows.shape == (K, layout.width)
        assert np.all(np.isfinite(rows))
        fields = layout.unpack(rows)
        assert np.all(np.abs(fields[replay.ACTION]) <= 2.0)
        assert np.all(fields[replay.DISCOUNT] == 1.0)  # Pendulum never terminates
    if num_envs == 1:
        # One env: consecutive rows chain (s' of a row is s of the next), except
        # across the few resets (NaN steps, episode ends) that fall inside an item.
        pairs = chained = 0
        for sample in samples:
            fields = layout.unpack(np.asarray(sample.data[0]))
            same = np.all(fields[replay.NEXT_OBSERVATION][:-1] == fields[replay.OBSERVATION][1:], 1)
            pairs, chained = pairs + len(same), chained + int(same.sum())
        assert chained >= 0.9 * pairs, (chained, pairs)


def test_actor_and_evaluator_make_numpy_blas_single_threaded(reverb_server, root_dir):
    # OpenBLAS threads spin between batch-1 policy calls: with them, an evaluation
    # of HalfCheetah took a second core (benchmarks/README.md, "probe.py job_cpu").
    from threadpoolctl import threadpool_info, threadpool_limits

    from sac_distributed.jobs.evaluation import EvalLoop

    def blas_threads():
        return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    address = f"localhost:{reverb_server.port}"
    client_config = config_lib.ClientConfig(address, address, connect_timeout_s=10.0)
    hparams = small_hparams()
    connection = Connection(client_config, "test job", lambda: False)
    connection.open()
    env = env_loader.load_env(ENV_NAME, 1)
    builds = {
        "evaluator": lambda: EvalLoop(
            config_lib.EvaluatorConfig(ENV_NAME, hparams, root_dir, client=client_config),
            env,
            connection,
            Metrics(None),
            lambda: False,
        ),
        "actor": lambda: ActorLoop(
            config_lib.ActorConfig(ENV_NAME, hparams, root_dir, client=client_config),
            [env],
            connection,
            Metrics(None),
            lambda: False,
        ),
    }
    for job, build in builds.items():
        with threadpool_limits(limits=2, user_api="blas"):  # restored on exit
            assert blas_threads() == {2}, "this test needs NumPy built with a BLAS"
            build()
            assert blas_threads() == {1}, job
