"""In-process helpers the test files and conftest.py's fixtures share: small SAC
configs, random transitions and observations, waiting on a replay table, a learner
config, constant batches and the CrossQ learner that trains on them, and the check
that an exported policy plays the evaluator's episodes.

conftest.py imports this module after it has set TensorFlow's thread counts and
split the CPU in two (its docstring); `import sac_distributed` comes first here too,
because it must run before TensorFlow is imported (it selects Keras 2).
"""

import os
import time
from typing import Dict, List, Optional

import sac_distributed  # noqa: F401  (must come before tensorflow)

# isort: split
import numpy as np
import portpicker
import reverb
import tensorflow as tf
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from sac_distributed import config as config_lib
from sac_distributed import replay
from sac_distributed.algorithm import registry
from sac_distributed.algorithm import strategy as strategy_lib
from sac_distributed.envs import loader as env_loader

ENV_NAME = "Pendulum-v1"

# Small enough to train a few dozen steps in seconds on a busy 2-core CPU.
SMALL_HPARAMS = dict(
    initial_collect_steps=64,
    replay_buffer_capacity=2_000,
    batch_size=32,
    actor_fc_layer_params=(16, 16),
    critic_joint_fc_layer_params=(16, 16),
    num_iterations=20,
    policy_save_interval=20,
    eval_interval=10,
    num_eval_episodes=1,
    samples_per_insert=0,  # MinSize: the tests control the data themselves
)


def small_hparams(**overrides) -> config_lib.Hyperparams:
    return config_lib.hyperparams_for(ENV_NAME, {**SMALL_HPARAMS, **overrides})


def pick_free_port() -> int:
    """A TCP port nothing listens on right now."""
    return portpicker.pick_unused_port()


def random_transitions(
    specs, n: int, seed: int = 0, reward: Optional[float] = None
) -> List[Dict[str, np.ndarray]]:
    """`n` transitions in the env's bounds; row i has reward i (or `reward`)."""
    rng = np.random.default_rng(seed)
    obs_shape, act = tuple(specs.observation.shape), specs.action
    low = np.broadcast_to(act.minimum, act.shape).astype(np.float32)
    high = np.broadcast_to(act.maximum, act.shape).astype(np.float32)
    return [
        {
            replay.OBSERVATION: rng.uniform(-1, 1, obs_shape).astype(np.float32),
            replay.ACTION: rng.uniform(low, high).astype(np.float32),
            replay.REWARD: np.float32(i if reward is None else reward),
            replay.DISCOUNT: np.float32(rng.choice([0.0, 1.0], p=[0.1, 0.9])),
            replay.NEXT_OBSERVATION: rng.uniform(-1, 1, obs_shape).astype(np.float32),
        }
        for i in range(n)
    ]


def random_observations(specs, n: int, seed: int, scale: float = 1.0) -> np.ndarray:
    """`n` float32 observations of the env's shape, uniform in [-scale, scale]."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-scale, scale, (n,) + tuple(specs.observation.shape)).astype(np.float32)


def wait_for_size(client: reverb.Client, table: str, size: int, timeout_s: float = 600.0) -> int:
    """Polls until `table` holds at least `size` items; fails after the deadline."""
    end = time.monotonic() + timeout_s
    current = None
    while True:
        try:
            current = replay.table_info(client, table).current_size
        except replay.TRANSIENT_ERRORS:  # a busy server answering late: ask again
            pass
        else:
            if current >= size:
                return current
        if time.monotonic() > end:
            raise AssertionError(
                f"waited {timeout_s} s for {table} to hold {size} items; it holds {current}"
            )
        time.sleep(0.05)


def learner_config(
    root_dir: str, address: str, hparams_overrides=None, **overrides
) -> config_lib.LearnerConfig:
    """A LearnerConfig with small nets that checkpoints and publishes every 10 steps."""
    kwargs = dict(
        env_name=ENV_NAME,
        hparams=small_hparams(**(hparams_overrides or {})),
        root_dir=root_dir,
        client=config_lib.ClientConfig(
            replay_buffer_server_address=address,
            variable_container_server_address=address,
            connect_timeout_s=10.0,
        ),
        strategy="default",
        steps_per_call=10,
        variable_push_interval=10,
        checkpoint_interval=10,
        summary_interval=10,
    )
    kwargs.update(overrides)
    return config_lib.LearnerConfig(**kwargs)


def assert_exported_policy_plays_the_evaluators_episodes(
    server: reverb.Server, root_dir: str, specs, episodes: int, seed: int
) -> None:
    """The evaluator's path (the container's weights in NumPy, on the env as the jobs
    load it: `specs.action`'s bounds) and sac-evaluate's (the run's greedy SavedModel
    through TF-Agents, on the env as it is) play the same seeded episodes to the same
    returns, and the episodes differ from one another."""
    from sac_distributed import paths
    from sac_distributed.algorithm.policy import NumpyActorPolicy
    from sac_distributed.jobs.evaluation import run_episodes
    from sac_distributed.replay.variables import VariableContainer
    from sac_distributed.tools import inspect_policy

    snapshot = VariableContainer(server.localhost_client()).pull()
    spec = specs.action
    numpy_policy = NumpyActorPolicy(spec.minimum, spec.maximum, spec.shape)
    numpy_policy.set_weights(snapshot.policy_weights, snapshot.normalization)
    jobs_env = env_loader.load_env(ENV_NAME, seed, rescale_actions=specs.env_action is not None)
    evaluator_returns, _ = run_episodes(jobs_env, numpy_policy, episodes)

    report = inspect_policy.evaluate(
        os.path.join(root_dir, paths.POLICIES_DIR, "greedy_policy"),
        episodes,
        env_name=ENV_NAME,
        seed=seed,
    )
    exported_returns = np.asarray(report.stats.returns)
    # Same start states, same deterministic actions up to float32 rounding.
    np.testing.assert_allclose(exported_returns, evaluator_returns, rtol=1e-3, atol=1e-2)
    # And the episodes differ from one another: the agreement is not trivial.
    assert np.std(exported_returns) > 1.0, exported_returns


# --- constant batches, and the CrossQ learner on them ---------------------------------

BATCH = 32


def make_batch(specs, seed: int = 0, size: int = BATCH) -> trajectory.Transition:
    """A Transition batch of `size` random observations, actions and rewards."""
    rng = np.random.default_rng(seed)
    obs_size = int(specs.observation.shape.num_elements())
    act = specs.action
    obs, next_obs = (
        tf.constant(rng.uniform(-1, 1, (size, obs_size)).astype(np.float32)) for _ in range(2)
    )
    actions = rng.uniform(act.minimum, act.maximum, (size,) + tuple(act.shape))
    zeros, ones = tf.zeros([size]), tf.ones([size])
    mid = tf.fill([size], ts.StepType.MID)
    return trajectory.Transition(
        ts.TimeStep(mid, zeros, ones, obs),
        policy_step.PolicyStep(tf.constant(actions.astype(np.float32)), (), ()),
        ts.TimeStep(mid, tf.constant(rng.normal(size=size).astype(np.float32)), ones, next_obs),
    )


def batches(specs, seed: int = 0, size: int = BATCH):
    """make_batch's one batch, repeated: what `learner.step` takes."""
    return iter(tf.data.Dataset.from_tensors(make_batch(specs, seed, size)).repeat())


def crossq_hparams(**overrides) -> config_lib.Hyperparams:
    return small_hparams(algorithm="crossq", **overrides)


def new_crossq_learner(env_specs, root_dir, seed=0, **overrides):
    """A CrossQLearner with small nets under the default strategy."""
    strategy = strategy_lib.make_strategy("default")
    return registry.make_learner(env_specs, crossq_hparams(**overrides), strategy, root_dir, seed)
