"""Shared fixtures: a real in-process Reverb server, small SAC configs, a learner on it.
The helpers they are built on (and that test files import) are support/training.py's.

`import sac_distributed` must run before TensorFlow is imported (it selects
Keras 2), and the CPU is split into two logical devices here, at import time,
before any TensorFlow op runs, so that MirroredStrategy gets two replicas.

Factories (`new_server`, `write_replay`, `new_learner`) are session-scoped so
that module-scoped fixtures can use them too; the function-scoped fixtures
(`reverb_server`, `fill_replay`, `make_learner`, ...) are built on them.

Every TensorFlow in the suite (the pytest workers and the binaries they start,
which inherit the environment) runs its ops on one thread: with two workers on
two cores, each test's several TF processes would otherwise each start thread
pools sized for the whole machine. The measured gain is within run-to-run noise
(17 min 18 s against 18 min 36 s, one run each). The tests check what happens,
not how fast; the benchmarks run with TensorFlow's defaults.
"""

import os

os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

import sac_distributed  # noqa: F401, E402  (must come before tensorflow)
from sac_distributed.algorithm import strategy as strategy_lib

strategy_lib.use_logical_cpus(2)

from typing import Callable, Optional  # noqa: E402

import pytest  # noqa: E402
import reverb  # noqa: E402
from support.training import (  # noqa: E402
    ENV_NAME,
    learner_config,
    pick_free_port,
    random_transitions,
    small_hparams,
    wait_for_size,
)

from sac_distributed import config as config_lib  # noqa: E402
from sac_distributed import replay  # noqa: E402
from sac_distributed.envs import loader as env_loader  # noqa: E402
from sac_distributed.runtime import Metrics  # noqa: E402


@pytest.fixture
def free_port() -> Callable[[], int]:
    """`free_port()` returns a port nothing listens on."""
    return pick_free_port


@pytest.fixture(scope="session")
def env_name() -> str:
    return ENV_NAME


@pytest.fixture(scope="session")
def hparams() -> config_lib.Hyperparams:
    return small_hparams()


@pytest.fixture(scope="session")
def env_specs():
    return env_loader.specs_for(ENV_NAME)


@pytest.fixture(scope="session")
def new_server(env_specs, tmp_path_factory):
    """`new_server(hparams=None)` starts a real Reverb server with both tables.

    Every server it started is stopped at the end of the session; stop it
    earlier with `server.stop()` where the test no longer needs it.
    """
    servers = []

    def start(hparams: Optional[config_lib.Hyperparams] = None) -> reverb.Server:
        config = config_lib.ServerConfig(
            env_name=ENV_NAME,
            hparams=hparams or small_hparams(),
            root_dir=str(tmp_path_factory.mktemp("server")),
            port=0,
        )
        server = reverb.Server(replay.make_tables(config, env_specs), port=None)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def write_replay(env_specs):
    """`write_replay(client, n, seed=0, reward=None)` writes n transitions and waits for them.

    Goes through the actor's TransitionWriter (K from the server's table; n must
    be a multiple of K) and returns the transitions.
    """

    def write(client: reverb.Client, n: int, seed: int = 0, reward: Optional[float] = None):
        transitions = random_transitions(env_specs, n, seed=seed, reward=reward)
        before = replay.table_info(client, replay.REPLAY_TABLE).current_size
        writer = replay.TransitionWriter(client)
        k = writer.transitions_per_item
        assert n % k == 0, f"write_replay: {n} transitions do not fill items of {k}"
        try:
            for transition in transitions:
                writer.write(transition)
                assert writer.throttle(timeout_ms=300_000), (
                    "waited 300 s for the replay to take an insert"
                )
            assert writer.flush(timeout_ms=300_000), (
                "waited 300 s for the replay to confirm inserts"
            )
        finally:
            assert writer.close() == 0
        assert writer.items_written == n
        wait_for_size(client, replay.REPLAY_TABLE, before + n // k)
        return transitions

    return write


@pytest.fixture(scope="session")
def new_learner(env_specs):
    """`new_learner(config, server, should_stop=None)` -> a LearnerLoop on `server`.

    Wired like jobs.run_learner: a Connection (replay + variable clients, after
    the bounded wait) and no TensorBoard writer. `loop.run()` waits for
    min_replay_size items, so fill the replay first.
    """
    from sac_distributed.jobs.learner_loop import LearnerLoop
    from sac_distributed.replay.connection import Connection

    def build(config: config_lib.LearnerConfig, server: reverb.Server, should_stop=None):
        assert config.client.replay_buffer_server_address == f"localhost:{server.port}"
        should_stop = should_stop or (lambda: False)
        connection = Connection(config.client, "test learner", should_stop)
        connection.open()
        strategy = strategy_lib.make_strategy(config.strategy)
        return LearnerLoop(config, env_specs, strategy, connection, Metrics(None), should_stop)

    return build


# --- function-scoped conveniences ----------------------------------------------


@pytest.fixture
def root_dir(tmp_path) -> str:
    path = tmp_path / "root"
    path.mkdir()
    return str(path)


@pytest.fixture
def reverb_server(new_server):
    """A fresh real Reverb server (Pendulum-v1, small hparams) for one test."""
    server = new_server()
    yield server
    server.stop()


@pytest.fixture
def server_address(reverb_server) -> str:
    return f"localhost:{reverb_server.port}"


@pytest.fixture
def client(reverb_server) -> reverb.Client:
    return reverb_server.localhost_client()


@pytest.fixture
def fill_replay(client, write_replay):
    """`fill_replay(n, seed=0, reward=None)` writes n transitions to `reverb_server`."""
    return lambda n, seed=0, reward=None: write_replay(client, n, seed=seed, reward=reward)


@pytest.fixture
def make_learner_config(root_dir, server_address):
    """`make_learner_config(hparams_overrides=None, **overrides)` for `reverb_server`."""
    return lambda hparams_overrides=None, **overrides: learner_config(
        root_dir, server_address, hparams_overrides, **overrides
    )


@pytest.fixture
def make_learner(new_learner, reverb_server):
    """`make_learner(config, should_stop=None)` -> a LearnerLoop on `reverb_server`."""
    return lambda config, should_stop=None: new_learner(config, reverb_server, should_stop)


# --- the order in which `make test` hands files to its two workers -----------------

# The longest test files, longest first (about how long each took in a whole
# `make test` run, read with tests/support/cpu_profile.py; the order matters, not the numbers).
# `make test` runs `--dist loadfile --no-loadscope-reorder`, which hands whole
# files to its three workers in collection order: starting the long ones first and
# leaving the short ones for the end keeps every worker busy until the last
# minute. Order only: a file missing here still runs, after these, in the usual
# order.
LONGEST_FILES_FIRST = (  # wall s per file in a fresh-clone suite alone, 2026-12-02 (ac8dec7)
    # 330-440 s alone (a jobs venv install, kernels on 3.12, 3.13, 3.11), 2026-12-03 (d98cc83)
    "test_notebook.py",
    # ~80 s alone with the image cached (one Compose run, down and up again), 2026-12-03
    "test_docker_compose.py",
    "test_chaos.py",  # 221 s, 110 CPU-s
    "test_learning_benchmark.py",  # 187 s, 124 CPU-s
    "test_ray_launch.py",  # 182 s, 29 CPU-s
    "test_shards.py",  # 141 s, 88 CPU-s
    "test_docs_examples.py",  # 131 s, 101 CPU-s
    "test_reliability.py",  # 128 s, 82 CPU-s
    "test_learning_rate_schedule.py",  # 108 s, 31 CPU-s
    "test_ray_one_machine.py",  # 106 s, 23 CPU-s
    "test_reused_root_dir.py",  # 97 s, 60 CPU-s
    "test_peer_sb3loop.py",  # 95 s, 37 CPU-s
    "test_policy_averaging.py",  # 94 s, 39 CPU-s
    "test_launch.py",  # 91 s, 45 CPU-s
    "test_thread_launch.py",  # 90 s, 49 CPU-s
    "test_crossq_cost.py",  # 87 s, 37 CPU-s
    "test_crossq_ablations.py",  # 79 s, 63 CPU-s
    "test_critic_layer_norm.py",  # 77 s, 30 CPU-s
    "test_guards.py",  # 77 s, 38 CPU-s
    "test_load.py",  # 75 s, 86 CPU-s
    "test_replay_checkpoints.py",  # 69 s, 42 CPU-s
    "test_launch_shards.py",  # 68 s, 53 CPU-s
    "test_ownership.py",  # 66 s, 36 CPU-s
    "test_integration.py",  # 62 s, 45 CPU-s
    "test_status.py",  # 61 s, 26 CPU-s
    "test_own_env_run.py",  # 57 s, 37 CPU-s
    "test_config_mismatch.py",  # 56 s, 17 CPU-s
    "test_prioritized_replay.py",  # 56 s, 35 CPU-s
    "test_kubernetes_run.py",  # 53 s, 43 CPU-s
    "test_kubernetes.py",  # 50 s, 20 CPU-s
    "test_seed.py",  # 50 s, 74 CPU-s
    "test_compose_run.py",  # 50 s, 50 CPU-s
    "test_evaluate_tool.py",  # 49 s, 34 CPU-s
)


def pytest_collection_modifyitems(items) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: keeps the rest
