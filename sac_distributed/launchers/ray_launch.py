"""Ray engine: the jobs of `job_definitions` as Ray actors on a Ray cluster.

`sac-launch --engine=ray` builds the same `JobSpec`s as the local launcher
(same binaries, same flags) and gives each to one `JobProcess`, a Ray actor
that runs the spec's command line as its child process and waits on it. Ray
then does the placing and the supervising:

  * placement: the server is pinned to the head node (NodeAffinity), which
    also picks its port there; its address is handed to every other job. With
    --num_replay_shards=N, shard 0 (which also holds the weights) is that
    server, and shard i is pinned to the i-th node of the list head, then the
    other nodes (round robin, so one node holds them all), with its port
    picked on that node (--port + i when --port is given); every client gets
    the N addresses. A shard, like the server, is restarted on its own node
    and port, where its replay checkpoint is, so a lost node loses its shard
    for good (the run then stops). The
    learner goes to the head node too (or, with --learner_gpus, to the first
    node that has them) and stays there, so that a restart finds its
    checkpoints; the evaluator runs beside it (its results are read there).
    Actors are spread over the nodes (SPREAD), --actor_cpus each.
  * restarts: a job whose process dies (a crash, a kill, its Ray worker or its
    node lost) is restarted by Ray up to --max_restarts times, and the pending
    `run()` call is retried on the new instance. A restarted learner resumes
    from its last checkpoint, a restarted server (same node, same port) from
    its last replay checkpoint. A job that exits 2 (a user error: a bad
    setting, a run owned by another learner) is not restarted; the run stops.
  * the end: when the learner exits 0, actors and evaluator exit on their own
    (they see its done flag), then the server is stopped gracefully (it
    writes its replay checkpoint). Ctrl-C or SIGTERM stops every job the same
    way. If the launcher itself is killed (SIGKILL, a second Ctrl-C), Ray ends
    the actors it owns and kills their job processes (Ray's worker-exit child
    cleanup; PR_SET_PDEATHSIG sends SIGTERM where that cleanup is off), so
    nothing keeps running, without the final checkpoints of a graceful stop.

Only this module and ray_job.py (the job actor, `JobProcess`) import Ray;
nothing in the core does.
"""

from __future__ import annotations

import os

# One line per job and event: Ray's log de-duplication would merge the actors' lines.
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from typing import Callable, Dict, List, Optional, Sequence, TextIO, Tuple  # noqa: E402

import portpicker  # noqa: E402
import ray  # noqa: E402
from ray._private import ray_constants  # noqa: E402  (the single-machine switch)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from sac_distributed import paths  # noqa: E402
from sac_distributed.config import LaunchConfig  # noqa: E402
from sac_distributed.errors import ConfigError  # noqa: E402
from sac_distributed.launchers import job_definitions  # noqa: E402
from sac_distributed.launchers.job_definitions import EVALUATOR, LEARNER, is_server  # noqa: E402
from sac_distributed.launchers.ray_job import (  # noqa: E402, F401  (JobProcess: importable here)
    GRACE_S,
    POLL_S,
    USER_ERROR_EXIT_CODE,
    JobProcess,
)
from sac_distributed.launchers.supervisor import LaunchResult  # noqa: E402

HEAD_NODE_RESOURCE = "node:__internal_head__"  # every Ray head node has this resource
# Ray's switch for its single-machine mode ("0"), named for the platforms where that
# mode is the default: the node's address is 127.0.0.1, every Ray process listens on
# the loopback interface only, and no other node can join. Ray reads it at import.
LOOPBACK_VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
LOOPBACK = "127.0.0.1"


def connect(address: Optional[str], num_cpus_needed: float) -> bool:
    """Connects to the cluster at `address` (or $RAY_ADDRESS, which `ray job submit`
    sets), or starts a local one on 127.0.0.1 (`stay_on_loopback`); True if started here.

    A cluster's nodes hand the jobs the address each node registered with Ray:
    its network address on a cluster of several hosts, 127.0.0.1 for a head
    started in Ray's single-machine mode (README, Ray).
    """
    address = address or os.environ.get("RAY_ADDRESS")
    if not sys.stdout.isatty():  # Ray colours its "(JobProcess pid=...)" prefixes
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    if address:
        ray.init(address=address, log_to_driver=True)
        return False
    stay_on_loopback()
    ray.init(
        address="local",  # a new Ray, even where `ray start` left one running
        num_cpus=max(os.cpu_count() or 1, int(num_cpus_needed + 0.999)),
        include_dashboard=False,
        log_to_driver=True,
    )
    return True


def stay_on_loopback() -> Callable[[], None]:
    """Puts the Ray this process starts next on 127.0.0.1: Ray's single-machine mode.

    Without it a local Ray registers the machine's network address, its
    processes listen on every interface, and the Reverb server's address
    handed to the jobs is that network address. The processes Ray starts read
    LOOPBACK_VARIABLE from the environment; this process imported Ray before,
    so its copy of the switch is set as well. Returns a function that undoes
    both (for tests that start a Ray cluster in their own process).
    """
    before_env = os.environ.get(LOOPBACK_VARIABLE)
    before_switch = ray_constants.ENABLE_RAY_CLUSTER
    os.environ[LOOPBACK_VARIABLE] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False

    def undo() -> None:
        ray_constants.ENABLE_RAY_CLUSTER = before_switch
        if before_env is None:
            os.environ.pop(LOOPBACK_VARIABLE, None)
        else:
            os.environ[LOOPBACK_VARIABLE] = before_env

    return undo


def too_few_cpus(total_cpus: float, config: LaunchConfig) -> str:
    """What the run asks of Ray's CPU count, and what to run instead (one machine too)."""
    needed = cpus_needed(config)
    return (
        f"The Ray cluster has {total_cpus:g} CPUs; this run asks for {needed:g} "
        f"({config.num_replay_shards} for the Reverb server(s), 2 for learner and evaluator, "
        f"--actor_cpus={config.actor_cpus:g} for each of {config.num_actors} actors). Ray's "
        "CPUs are a count for placing jobs, not cores: on one machine run `ray stop; ray start "
        f"--head --num-cpus={math.ceil(needed)}`, or leave out "
        "--ray_address (sac-launch then starts a local Ray sized for the run); or lower "
        "--num_actors or --actor_cpus (fractions and 0 are allowed); or add nodes."
    )


def cpus_needed(config: LaunchConfig) -> float:
    """Each server (replay shard), the learner and the evaluator take one CPU, every
    actor --actor_cpus."""
    return 2 + config.num_replay_shards + config.num_actors * config.actor_cpus


@ray.remote(num_cpus=0)
def _address_on_node(port: int) -> Tuple[str, int]:
    """This node's IP and `port`, or a free port there when `port` is 0."""
    return ray.util.get_node_ip_address(), port or portpicker.pick_unused_port()


def _pinned(node_id: str, soft: bool = False) -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=soft)


def _alive_nodes() -> List[dict]:
    return [n for n in ray.nodes() if n.get("Alive")]


def choose_nodes(config: LaunchConfig) -> Tuple[List[str], str]:
    """Each server's node (shard order, shard 0 on the head) and the learner's;
    raises ConfigError if the cluster cannot hold the run, instead of leaving
    jobs pending forever."""
    nodes = _alive_nodes()
    head = [n for n in nodes if HEAD_NODE_RESOURCE in n["Resources"]]
    if not head:
        raise ConfigError("The Ray cluster has no head node alive.")
    total_cpus = sum(n["Resources"].get("CPU", 0) for n in nodes)
    if total_cpus < cpus_needed(config):
        raise ConfigError(too_few_cpus(total_cpus, config))
    learner = [
        n
        for n in head + nodes
        if n["Resources"].get("GPU", 0) >= config.learner_gpus and n["Resources"].get("CPU", 0) >= 1
    ]
    if not learner:
        raise ConfigError(
            f"No Ray node has --learner_gpus={config.learner_gpus:g} GPUs and a CPU for "
            "the learner."
        )
    return shard_nodes(nodes, config.num_replay_shards), learner[0]["NodeID"]


def shard_nodes(nodes: Sequence[dict], num_shards: int) -> List[str]:
    """Node ids for the replay shards: the head first, then the other nodes with a
    CPU, round robin (so a one-node cluster holds every shard)."""
    head = [n["NodeID"] for n in nodes if HEAD_NODE_RESOURCE in n["Resources"]]
    others = [
        n["NodeID"]
        for n in nodes
        if HEAD_NODE_RESOURCE not in n["Resources"] and n["Resources"].get("CPU", 0) >= 1
    ]
    order = head[:1] + others
    return [order[shard % len(order)] for shard in range(num_shards)]


def start_jobs(
    config: LaunchConfig, verbose: bool
) -> Tuple[Dict[str, ray.actor.ActorHandle], Tuple[str, ...]]:
    """Places the servers, reads their addresses, then starts every job; returns
    the job actors by name and the servers' addresses (shard order)."""
    server_nodes, learner_node = choose_nodes(config)
    found = ray.get(
        [
            _address_on_node.options(scheduling_strategy=_pinned(node)).remote(
                config.port and config.port + shard
            )
            for shard, node in enumerate(server_nodes)
        ]
    )
    hosts, ports = [host for host, _ in found], [port for _, port in found]
    configs = job_definitions.make_run_configs(config, ports, hosts=hosts)
    specs = job_definitions.job_specs(configs, verbose=verbose)
    server_node_of = dict(zip(job_definitions.server_names(len(server_nodes)), server_nodes))
    run_id = uuid.uuid4().hex[:12]
    job_class = ray.remote(JobProcess)
    actors = {}
    for spec in specs:
        options = _job_options(spec.name, config, server_node_of.get(spec.name), learner_node)
        actors[spec.name] = job_class.options(
            name=f"sac-{run_id}-{spec.name}",
            max_restarts=config.max_restarts,
            max_task_retries=-1,
            max_concurrency=2,  # stop() runs while run() waits on the child
            **options,
        ).remote(spec, paths.log_dir(config.root_dir), run_id, verbose, _forwarded_env())
    return actors, configs.learner.client.replay_addresses


def _forwarded_env() -> Dict[str, str]:
    """The launcher's PYTHONPATH, which holds a user env module's folder (bin/launch.py
    puts it there): Ray workers start with the raylet's environment, not ours. On a
    cluster of several machines that folder must exist on each (or the module be
    installed in the image)."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}


def _job_options(
    name: str, config: LaunchConfig, server_node: Optional[str], learner_node: str
) -> dict:
    if server_node is not None:
        return dict(num_cpus=1, scheduling_strategy=_pinned(server_node))
    if name == LEARNER:
        return dict(
            num_cpus=1, num_gpus=config.learner_gpus, scheduling_strategy=_pinned(learner_node)
        )
    if name == EVALUATOR:
        return dict(num_cpus=1, scheduling_strategy=_pinned(learner_node, soft=True))
    return dict(num_cpus=config.actor_cpus, scheduling_strategy="SPREAD")


class RayRun:
    """Watches the job actors' `run()` calls and stops them together."""

    def __init__(
        self,
        actors: Dict[str, ray.actor.ActorHandle],
        should_stop: Callable[[], bool],
        console: TextIO = sys.stdout,
        before_servers_stop: Optional[Callable[[], None]] = None,
    ):
        """`before_servers_stop` runs once the clients stopped, while the servers serve."""
        self._actors = actors
        self._should_stop = should_stop
        self._before_servers_stop = before_servers_stop
        self._console = console
        self._codes: Dict[str, Optional[int]] = {name: None for name in actors}

    def run(self) -> LaunchResult:
        refs = {actor.run.remote(): name for name, actor in self._actors.items()}
        try:
            return self._watch(refs)
        finally:
            self._stop_all(list(refs))

    def _watch(self, refs: Dict[ray.ObjectRef, str]) -> LaunchResult:
        pending = list(refs)
        learner_done_at: Optional[float] = None
        while True:
            if self._should_stop():
                return self._result(0, "stopped on request (Ctrl-C / SIGTERM)")
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
            for ref in ready:
                failure = self._collect(refs[ref], ref)
                if failure is not None:
                    return self._result(1, failure)
            clients = [n for n in self._actors if not is_server(n)]
            if all(self._codes[n] == 0 for n in clients):
                return self._result(0, "training finished; every job exited 0")
            if self._codes[LEARNER] == 0 and learner_done_at is None:
                learner_done_at = time.monotonic()
                self._say(f"learner finished; waiting up to {GRACE_S:.0f} s for the others")
            if learner_done_at and time.monotonic() - learner_done_at > GRACE_S:
                late = [n for n in clients if self._codes[n] is None]
                return self._result(1, f"learner finished but {late} did not exit in time")

    def _collect(self, name: str, ref: ray.ObjectRef) -> Optional[str]:
        """Records a finished job; returns why the run must stop, if it must."""
        try:
            code = ray.get(ref)
        except ray.exceptions.RayActorError as error:
            return f"{name} died and Ray gave up restarting it (--max_restarts): {error}"
        self._codes[name] = code
        if code != 0:
            tail = "\n".join(f"    {line}" for line in self._last_lines(name))
            return (
                f"{name} exited with code {code}; its last lines:\n{tail}\n"
                f"Full log: logs/{name}.log under root_dir on the node that ran it"
            )
        if is_server(name):
            return f"{name} exited before the learner finished"
        return None

    def _last_lines(self, name: str) -> List[str]:
        try:
            return ray.get(self._actors[name].last_lines.remote(), timeout=30)
        except (ray.exceptions.RayError, TimeoutError):
            return ["(its Ray actor is gone)"]

    def _result(self, exit_code: int, message: str) -> LaunchResult:
        return LaunchResult(exit_code, message, dict(self._codes))

    def _stop_all(self, run_refs: List[ray.ObjectRef]) -> None:
        """Clients first, then the servers (they write their replay checkpoints), then
        the actors."""
        clients = [a for n, a in self._actors.items() if not is_server(n)]
        self._stop(clients, "clients")
        if self._before_servers_stop is not None:
            try:
                self._before_servers_stop()
            except Exception as error:  # noqa: BLE001  (a report must not keep servers up)
                self._say(f"could not read the servers before stopping them: {error}")
        servers = [a for n, a in self._actors.items() if is_server(n)]
        self._stop(servers, "servers")
        # Each run() call writes its job's last log line and cleans up as it returns.
        ray.wait(run_refs, num_returns=len(run_refs), timeout=POLL_S * 20)
        for actor in self._actors.values():
            ray.kill(actor, no_restart=True)

    def _stop(self, actors: Sequence[ray.actor.ActorHandle], what: str) -> None:
        refs = [actor.stop.remote(GRACE_S) for actor in actors]
        _, late = ray.wait(refs, num_returns=len(refs), timeout=GRACE_S + 30)
        if late:
            self._say(f"{len(late)} {what} did not stop within {GRACE_S:.0f} s; killing them")

    def _say(self, text: str) -> None:
        self._console.write(f"sac-launch: {text}\n")
        self._console.flush()
