"""An environment that emits NaN and inf: the actor drops those steps and goes on."""

import logging

import numpy as np
from support.training import small_hparams
from tf_agents.environments import wrappers

from sac_distributed import config as config_lib
from sac_distributed import replay
from sac_distributed.envs import loader as env_loader
from sac_distributed.jobs.actor_loop import ActorLoop
from sac_distributed.replay.connection import Connection
from sac_distributed.runtime import Metrics

NAN_REWARD_EVERY = 25
INF_OBSERVATION_EVERY = 40
STEPS = 400


class _FaultyEnv(wrappers.PyEnvironmentBaseWrapper):
    """Pendulum that returns a NaN reward and an inf observation now and then."""

    def __init__(self, env):
        super().__init__(env)
        self.count = 0
        self.bad = 0

    def _step(self, action):
        time_step = self._env.step(action)
        self.count += 1
        if self.count % NAN_REWARD_EVERY == 0:
            self.bad += 1
            return time_step._replace(reward=np.float32("nan"))
        if self.count % INF_OBSERVATION_EVERY == 0:
            self.bad += 1
            observation = time_step.observation.copy()
            observation[0] = np.inf
            return time_step._replace(observation=observation)
        return time_step


def test_actor_drops_non_finite_steps_counts_them_and_warns_once(
    reverb_server, server_address, root_dir, caplog
):
    caplog.set_level(logging.INFO, logger="absl")
    hparams = small_hparams()
    config = config_lib.ActorConfig(
        env_name="Pendulum-v1",
        hparams=hparams,
        root_dir=root_dir,
        client=config_lib.ClientConfig(server_address, server_address, connect_timeout_s=10),
        max_env_steps=STEPS,
        seed=1,
    )
    env = _FaultyEnv(env_loader.load_env("Pendulum-v1", seed=1))
    connection = Connection(config.client, "test actor", lambda: False)
    connection.open()
    stats = ActorLoop(config, [env], connection, Metrics(None), lambda: False).run()

    assert stats.env_steps == STEPS
    assert env.bad > 0
    assert stats.dropped_non_finite == env.bad
    written = stats.transitions_written
    assert written + stats.transitions_dropped == STEPS - env.bad
    # Only finite transitions reached the table, and all of them did.
    transitions_per_item = getattr(hparams, "transitions_per_item", 1)
    info = reverb_server.localhost_client().server_info()[replay.REPLAY_TABLE]
    assert info.current_size * transitions_per_item == written
    assert caplog.text.count("non-finite observation or reward") == 1
