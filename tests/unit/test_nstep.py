"""n-step rows: checked against the n-step target written out step by step,
and, on a real server, written by an actor as one transition per env step."""

import numpy as np
import pytest
from support.training import ENV_NAME, small_hparams
from tf_agents.environments import wrappers
from tf_agents.trajectories.time_step import StepType

from sac_distributed import config as config_lib
from sac_distributed import replay
from sac_distributed.envs import loader as env_loader
from sac_distributed.jobs.actor_loop import ActorLoop
from sac_distributed.replay import RowLayout, row_layout
from sac_distributed.replay.connection import Connection
from sac_distributed.replay.nstep import NStepAccumulator
from sac_distributed.runtime import Metrics

GAMMA = 0.9


def _episode_rows(layout: RowLayout, length: int, terminal: bool, seed: int = 0):
    """One-step rows of an episode whose observation i is [i, i, i]."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(length):
        last = t == length - 1
        discount = 0.0 if (last and terminal) else 1.0
        rows.append(
            layout.pack(
                np.full((1, 3), t),
                rng.uniform(-2, 2, (1, 1)),
                [rng.normal()],
                [discount],
                np.full((1, 3), t + 1),
            )[0]
        )
    return rows


def _expected(rows, layout, t: int, n: int):
    """The n-step target's parts for the transition starting at step t, by definition."""
    fields = [layout.unpack(r[np.newaxis]) for r in rows]
    m = min(n, len(rows) - t)
    reward, alive = 0.0, 1.0
    for k in range(m):
        reward += GAMMA**k * alive * fields[t + k]["reward"][0]
        alive *= fields[t + k]["discount"][0]
    bootstrap = GAMMA**m * alive  # what multiplies Q(next) in the target
    return reward, bootstrap, fields[t + m - 1]["next_observation"][0], fields[t]


def _accumulate(rows, layout, n):
    acc = NStepAccumulator(layout, n, GAMMA)
    out = [row for row in (acc.add(r) for r in rows) if row is not None]
    return out + acc.end_episode(), acc


@pytest.mark.parametrize("n", [1, 2, 3, 5, 20])
@pytest.mark.parametrize("terminal", [True, False])
def test_every_step_gets_its_n_step_target(env_specs, n, terminal):
    layout = row_layout(env_specs)
    rows = _episode_rows(layout, 7, terminal)
    out, acc = _accumulate(rows, layout, n)
    assert len(out) == len(rows) and len(acc) == 0  # one transition per step, none left
    for t, row in enumerate(out):
        got = layout.unpack(row[np.newaxis])
        reward, bootstrap, next_obs, first = _expected(rows, layout, t, n)
        np.testing.assert_allclose(got["reward"][0], reward, rtol=1e-6)
        # SacAgent multiplies the stored discount by gamma once more.
        np.testing.assert_allclose(GAMMA * got["discount"][0], bootstrap, rtol=1e-6)
        np.testing.assert_array_equal(got["next_observation"][0], next_obs)
        np.testing.assert_array_equal(got["observation"][0], first["observation"][0])
        np.testing.assert_array_equal(got["action"][0], first["action"][0])


def test_one_step_rows_pass_through_unchanged(env_specs):
    layout = row_layout(env_specs)
    rows = _episode_rows(layout, 4, terminal=True)
    out, _ = _accumulate(rows, layout, 1)
    for a, b in zip(out, rows):
        np.testing.assert_array_equal(a, b)


def test_terminal_step_cuts_the_bootstrap(env_specs):
    layout = row_layout(env_specs)
    rows = _episode_rows(layout, 3, terminal=True)
    out, _ = _accumulate(rows, layout, 5)
    assert all(layout.unpack(r[np.newaxis])["discount"][0] == 0.0 for r in out)


def test_a_bad_n_is_refused(env_specs):
    with pytest.raises(ValueError, match="n_step"):
        NStepAccumulator(row_layout(env_specs), 0, GAMMA)


# --- an actor writing n-step rows to a real server ------------------------------------


class RecordSteps(wrappers.PyEnvironmentBaseWrapper):
    """Records (observation, reward, discount, next observation, last) of every step."""

    def __init__(self, env):
        super().__init__(env)
        self.steps = []
        self._observation = None

    def _reset(self):
        time_step = self._env.reset()
        self._observation = np.asarray(time_step.observation, np.float32)
        return time_step

    def _step(self, action):
        time_step = self._env.step(action)
        next_observation = np.asarray(time_step.observation, np.float32)
        last = time_step.step_type == StepType.LAST
        self.steps.append(
            (
                self._observation,
                float(time_step.reward),
                float(time_step.discount),
                next_observation,
                last,
            )
        )
        self._observation = next_observation
        return time_step


def _n_step_targets(steps, n: int, gamma: float):
    """observation bytes -> (reward, gamma * discount, next observation), by definition."""
    targets = {}
    starts = [0] + [t + 1 for t, s in enumerate(steps) if s[4]]
    for begin, end in zip(starts, starts[1:]):
        for t in range(begin, end):
            m = min(n, end - t)
            reward = sum(gamma**k * steps[t + k][1] for k in range(m))  # Pendulum: d = 1
            targets[steps[t][0].tobytes()] = (reward, gamma**m, steps[t + m - 1][3])
    return targets


@pytest.mark.parametrize("num_envs", [1, 2])
def test_actor_writes_one_n_step_transition_per_step(new_server, root_dir, env_specs, num_envs):
    hparams = small_hparams(n_step=3, initial_collect_steps=0)
    server = new_server(hparams)
    address = f"localhost:{server.port}"
    client_config = config_lib.ClientConfig(address, address, connect_timeout_s=10.0)
    config = config_lib.ActorConfig(
        ENV_NAME, hparams, root_dir, client=client_config, num_envs=num_envs, max_env_steps=400
    )
    envs = [RecordSteps(env_loader.load_env(ENV_NAME, 5 + i)) for i in range(num_envs)]
    connection = Connection(client_config, "test actor", lambda: False)
    connection.open()
    try:
        stats = ActorLoop(config, envs, connection, Metrics(None), lambda: False).run()
        client = server.localhost_client()
        size = replay.table_info(client, replay.REPLAY_TABLE).current_size
        samples = list(client.sample(replay.REPLAY_TABLE, num_samples=200, emit_timesteps=False))
    finally:
        server.stop()

    # Every episode ends exactly at 400 steps: each step gave one transition.
    assert stats.env_steps == 400 and stats.episodes == 2
    assert stats.transitions_written == size == 400
    layout = row_layout(env_specs)
    targets = {}
    for env in envs:
        targets.update(_n_step_targets(env.steps, 3, hparams.gamma))
    for sample in samples:
        got = layout.unpack(np.asarray(sample.data[0]))
        reward, bootstrap, next_obs = targets[got["observation"][0].tobytes()]
        np.testing.assert_allclose(got["reward"][0], reward, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(hparams.gamma * got["discount"][0], bootstrap, rtol=1e-6)
        np.testing.assert_array_equal(got["next_observation"][0], next_obs)
