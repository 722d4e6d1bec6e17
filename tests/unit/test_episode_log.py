"""Each actor logs its training episodes to collect/actor_<task>/episodes.csv."""

import os

import pytest
from support.training import ENV_NAME, small_hparams
from tf_agents.environments import wrappers

from sac_distributed import config as config_lib
from sac_distributed import jobs, paths
from sac_distributed.envs import loader as env_loader
from sac_distributed.errors import ConfigError
from sac_distributed.jobs.actor_loop import ActorLoop
from sac_distributed.replay.connection import Connection
from sac_distributed.results import EpisodeLog, read_episodes
from sac_distributed.runtime import Metrics

EPISODE = 200  # Pendulum-v1's time limit


class SumsRewards(wrappers.PyEnvironmentBaseWrapper):
    """Keeps its own sum of each finished episode's rewards."""

    def __init__(self, env):
        super().__init__(env)
        self.returns = []
        self._sum = 0.0

    def _step(self, action):
        time_step = self._env.step(action)
        self._sum += float(time_step.reward)
        if time_step.is_last():
            self.returns.append(self._sum)
            self._sum = 0.0
        return time_step


def _actor_config(root_dir, address, max_env_steps):
    return config_lib.ActorConfig(
        ENV_NAME,
        small_hparams(),
        root_dir,
        client=config_lib.ClientConfig(address, address, connect_timeout_s=10.0),
        max_env_steps=max_env_steps,
        seed=3,
    )


def test_each_finished_episode_is_logged_with_its_return_and_length(root_dir, server_address):
    config = _actor_config(root_dir, server_address, 2 * EPISODE + 50)
    env = SumsRewards(env_loader.load_env(ENV_NAME, 3))
    log = EpisodeLog(os.path.join(root_dir, "episodes.csv"))
    connection = Connection(config.client, "test actor", lambda: False)
    connection.open()
    ActorLoop(config, [env], connection, Metrics(None), lambda: False, log).run()
    log.close()

    episodes = read_episodes(log.path)
    assert [e.actor_env_steps for e in episodes] == [EPISODE, 2 * EPISODE]
    assert [e.episode_length for e in episodes] == [EPISODE, EPISODE]
    assert [e.episode_return for e in episodes] == pytest.approx(env.returns, abs=1e-3)
    assert episodes[0].wall_time <= episodes[1].wall_time


def test_a_restarted_actor_appends_and_goes_on_counting(root_dir, server_address):
    jobs.run_actor(_actor_config(root_dir, server_address, EPISODE + 50), lambda: False)
    jobs.run_actor(_actor_config(root_dir, server_address, 2 * EPISODE + 50), lambda: False)

    episodes = read_episodes(paths.episodes_path(root_dir, 0))
    # The first life's 50 steps after its episode are not counted: 200, then 200 + 200, 400.
    assert [e.actor_env_steps for e in episodes] == [EPISODE, 2 * EPISODE, 3 * EPISODE]
    assert all(e.episode_length == EPISODE for e in episodes)


def test_a_row_cut_short_by_a_kill_is_dropped_and_the_rest_kept(tmp_path):
    path = str(tmp_path / "episodes.csv")
    log = EpisodeLog(path)
    log.append(200, -1200.5, 200)
    log.close()
    with open(path, "a") as f:
        f.write("1790000000.0,40")  # a kill in the middle of the next row
    assert [e.actor_env_steps for e in read_episodes(path)] == [200]

    log = EpisodeLog(path)
    log.append(100, -300.0, 100)
    log.close()
    episodes = read_episodes(path)
    assert [(e.actor_env_steps, e.episode_return) for e in episodes] == [
        (200, -1200.5),
        (300, -300.0),
    ]


def test_a_header_cut_short_starts_the_file_over(tmp_path):
    path = str(tmp_path / "episodes.csv")
    with open(path, "w") as f:
        f.write("wall_time,actor_")
    log = EpisodeLog(path)
    log.append(5, 1.0, 5)
    log.close()
    assert [e.actor_env_steps for e in read_episodes(path)] == [5]


def test_a_foreign_file_is_refused_and_left_as_it_was(tmp_path):
    path = str(tmp_path / "episodes.csv")
    foreign = "step,score\n1,2\n3,"
    with open(path, "w") as f:
        f.write(foreign)
    with pytest.raises(ConfigError, match="not an actor's training episodes file"):
        EpisodeLog(path)
    with open(path) as f:
        assert f.read() == foreign


def test_a_malformed_row_is_named_with_its_line(tmp_path):
    path = str(tmp_path / "episodes.csv")
    with open(path, "w") as f:
        f.write("wall_time,actor_env_steps,episode_return,episode_length\n1.0,x,2.0,3\n")
    with pytest.raises(ConfigError, match="line 2: malformed row"):
        read_episodes(path)


def test_a_missing_file_says_who_writes_it(tmp_path):
    with pytest.raises(ConfigError, match="Each actor writes"):
        read_episodes(str(tmp_path / "nothing.csv"))
