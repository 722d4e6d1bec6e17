"""Where a learner's reconnect spends its time, piece by piece, in one process.

After a lost server the learner (jobs/learner_loop.py `_recover`) reconnects,
calls `learner.retrace()` (new tf.functions, since the abandoned call may still
run the old ones), builds a new dataset iterator and publishes. Without spares
its next training call traces the update again and its next summary the
diagnostics; with spares traced ahead (`algorithm/traced.py`, from the
learner's first summary on) retrace() swaps them in. This tool times each of
those on a real in-process
Reverb server holding random Pendulum-like transitions, against a call of
the already traced update, in wall and CPU seconds, so the chaos tool's
recovery figures (benchmarks/chaos.py) can be split into their parts.

    python benchmarks/probe.py recovery_cost --env_name=Pendulum-v1 --repeats=3

--mode=channel times the other part, reconnecting: a server is stopped for
--down_s while a client keeps asking it (as a job's clients do), then started
again on the same port; it reports how long a brand-new `reverb.Client` takes
to get an answer while the old client still exists (gRPC shares one
subchannel, and its reconnect backoff, among the channels to one address in a
process), and how long once the old client is gone. --mode=lease does the same
as a learner's reconnect does it: `replay.connect` waiting from the moment the
server goes away, with the learner's lease heartbeat (which keeps a client to the
server between beats) beating all along. --mode=abandoned kills a server in a
process of its own (SIGKILL, as the chaos tool does) and times `replay.connect`
after its restart, alone, beside a dataset iterator left blocked in a sample from
the dead server (a learner's abandoned training call), and beside the heartbeat.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Optional

import sac_distributed  # noqa: F401  (selects tf-keras before TensorFlow)


def _timed(fn):
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def measure(env_name: str, overrides: dict, steps_per_call: int) -> dict:
    import numpy as np
    import portpicker
    import tensorflow as tf

    from sac_distributed import config as config_lib
    from sac_distributed import replay
    from sac_distributed.algorithm.registry import make_learner
    from sac_distributed.envs import loader as env_loader
    from sac_distributed.jobs.server import make_server

    # MinSize: the tool samples as fast as it likes from what it wrote once.
    hparams = config_lib.hyperparams_for(env_name, {"samples_per_insert": 0, **overrides})
    root = tempfile.mkdtemp(prefix="recovery_cost_")
    port = portpicker.pick_unused_port()
    address = f"localhost:{port}"
    server = make_server(config_lib.ServerConfig(env_name, hparams, root, port=port), port)
    specs = env_loader.specs_for(env_name)
    client = server.localhost_client()
    writer = replay.TransitionWriter(client, hparams.transitions_per_item)
    obs_dim = specs.observation.shape[0]
    act_dim = specs.action.shape[0]
    for _ in range(max(hparams.min_replay_items * hparams.transitions_per_item, 4 * 256)):
        obs = np.random.uniform(-1, 1, obs_dim).astype(np.float32)
        writer.write(
            {
                replay.OBSERVATION: obs,
                replay.ACTION: np.random.uniform(-1, 1, act_dim).astype(np.float32),
                replay.REWARD: np.float32(-1.0),
                replay.DISCOUNT: np.float32(1.0),
                replay.NEXT_OBSERVATION: obs,
            }
        )
    writer.close()
    learner = make_learner(specs, hparams, tf.distribute.get_strategy(), root, seed=0)

    def make_iterator():
        def dataset_fn(context):
            return replay.make_dataset(
                address,
                specs,
                context.get_per_replica_batch_size(hparams.batch_size),
                rate_limiter_timeout_ms=2_000,
                transitions_per_item=hparams.transitions_per_item,
            )

        return iter(learner.strategy.distribute_datasets_from_function(dataset_fn))

    out = {}
    iterator, out["first_iterator_wall"], out["first_iterator_cpu"] = _timed(make_iterator)
    _, out["first_call_wall"], out["first_call_cpu"] = _timed(
        lambda: learner.step(iterator, steps_per_call)
    )
    _, out["first_diagnostics_wall"], _ = _timed(lambda: learner.diagnostics(iterator))
    steady = [_timed(lambda: learner.step(iterator, steps_per_call)) for _ in range(3)]
    out["steady_call_wall"] = statistics.median(s[1] for s in steady)
    out["steady_call_cpu"] = statistics.median(s[2] for s in steady)
    _, out["retrace_wall"], _ = _timed(learner.retrace)
    iterator, out["new_iterator_wall"], out["new_iterator_cpu"] = _timed(make_iterator)
    _, out["retraced_call_wall"], out["retraced_call_cpu"] = _timed(
        lambda: learner.step(iterator, steps_per_call)
    )
    _, out["retraced_diagnostics_wall"], _ = _timed(lambda: learner.diagnostics(iterator))
    # The same call on a new iterator without retrace: what keeping the functions would cost.
    iterator, _, _ = _timed(make_iterator)
    _, out["kept_functions_new_iterator_call_wall"], _ = _timed(
        lambda: learner.step(iterator, steps_per_call)
    )
    # Spares traced ahead (what the learner does from its first summary on), then
    # swapped in by retrace(): the reconnect's path without tracing.
    learner.diagnostics(iterator)
    _, out["trace_spares_wall"], out["trace_spares_cpu"] = _timed(
        lambda: learner.trace_spares(iterator)
    )
    out["spares_swapped_in"] = float(learner.retrace())
    iterator, _, _ = _timed(make_iterator)
    _, out["spare_call_wall"], out["spare_call_cpu"] = _timed(
        lambda: learner.step(iterator, steps_per_call)
    )
    _, out["spare_diagnostics_wall"], _ = _timed(lambda: learner.diagnostics(iterator))
    out["spare_traces"] = float(learner.tracing_counts()["train"])
    server.stop()
    return {k: round(v, 3) for k, v in out.items()}


def channel_backoff(down_s: float, keep_old: bool) -> dict:
    """Seconds from a server's restart until a fresh client's first answer."""
    import gc

    import portpicker
    import reverb

    port = portpicker.pick_unused_port()
    address = f"localhost:{port}"

    def serve() -> reverb.Server:
        return reverb.Server([reverb.Table.queue("t", 10)], port=port)

    server = serve()
    old = reverb.Client(address)
    old.server_info(timeout=2)
    server.stop()
    start = time.monotonic()
    while time.monotonic() - start < down_s:  # the job keeps trying, as connect() does
        try:
            old.server_info(timeout=2)
        except (RuntimeError, reverb.errors.DeadlineExceededError):
            pass
        time.sleep(1.0)
    if not keep_old:
        del old
        gc.collect()
    server = serve()
    up = time.monotonic()
    while True:
        try:
            reverb.Client(address).server_info(timeout=5)
            break
        except (RuntimeError, reverb.errors.DeadlineExceededError):
            time.sleep(0.2)
    answered = time.monotonic() - up
    server.stop()
    return {"down_s": down_s, "old_client_kept": keep_old, "fresh_client_answers_s": answered}


def _connect_across_restart(address: str, down_s: float, restart):
    """`replay.connect` started now, as the server is gone; after `down_s` the server
    comes back by `restart()` (returning it and the time it was up). Returns the
    server and the seconds from its return until connect returned."""
    import threading

    from sac_distributed.replay import connection

    connected = {}

    def reconnect() -> None:
        connection.connect(address, down_s + 300, "probe")
        connected["at"] = time.monotonic()

    waiter = threading.Thread(target=reconnect, daemon=True)
    waiter.start()
    time.sleep(down_s)
    server, up = restart()
    waiter.join()
    return server, connected["at"] - up


def lease_backoff(down_s: float) -> dict:
    """Seconds from a server's restart until `replay.connect` returns, when it started
    waiting as the server went away and the learner's lease heartbeat
    (jobs/ownership.py) beat in the same process all along: a learner's reconnect."""

    import portpicker
    import reverb

    from sac_distributed.jobs import ownership

    port = portpicker.pick_unused_port()
    address = f"localhost:{port}"

    def serve() -> reverb.Server:
        return reverb.Server(ownership.make_tables(), port=port)

    server = serve()
    lease = ownership.Lease(address, ownership.Claim.mine())
    lease._start_heartbeat()  # the beats only; the server's arbiter is not needed here
    time.sleep(2 * ownership.HEARTBEAT_INTERVAL_S)
    server.stop()

    def restart():
        return serve(), time.monotonic()

    server, seconds = _connect_across_restart(address, down_s, restart)
    lease.release()
    server.stop()
    return {"mode": "lease", "down_s": down_s, "connect_returns_s": round(seconds, 3)}


# A Reverb server in a process of its own (the probe SIGKILLs it, as the chaos tool
# does): one empty queue table, so a sample waits; says LISTENING once it serves.
# With the lease tables too (`ownership.make_tables`), for the heartbeat.
_SERVE = (
    "import sys, time, reverb; from sac_distributed.jobs import ownership; "
    "s = reverb.Server([reverb.Table.queue('t', 10), *ownership.make_tables()], "
    "port=int(sys.argv[1])); print('LISTENING', flush=True); time.sleep(1e6)"
)


def _serve_process(port: int):
    """Starts `_SERVE` on `port`; returns (process, the time it said LISTENING)."""
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(port)],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    while proc.stdout.readline().strip() != "LISTENING":
        if proc.poll() is not None:
            raise RuntimeError("the probe's Reverb server did not start")
    return proc, time.monotonic()


def abandoned_backoff(down_s: float, abandon: bool, heartbeat: bool = False) -> dict:
    """Seconds from a SIGKILLed server's restart until `replay.connect` returns, when
    it started waiting as the server went away, with (`abandon`) or without a dataset
    iterator left behind in a thread, blocked in a sample from the dead server: the
    learner's abandoned training call (jobs/watchdog.py)."""
    import threading

    import portpicker
    import reverb
    import tensorflow as tf

    port = portpicker.pick_unused_port()
    address = f"localhost:{port}"
    server, _ = _serve_process(port)
    lease = None
    if heartbeat:
        from sac_distributed.jobs import ownership

        lease = ownership.Lease(address, ownership.Claim.mine())
        lease._start_heartbeat()  # the beats only, as in lease_backoff
        time.sleep(2 * ownership.HEARTBEAT_INTERVAL_S)
    if abandon:
        dataset = reverb.TrajectoryDataset(
            address, "t", tf.float32, tf.TensorShape([]), max_in_flight_samples_per_worker=1
        )

        def stuck() -> None:
            try:
                next(iter(dataset))
            except Exception:  # noqa: BLE001  (the dead server's error, if it ever comes)
                pass

        threading.Thread(target=stuck, daemon=True).start()
        time.sleep(2.0)  # it is sampling, held by the empty table
    server.kill()
    server.wait()
    server, seconds = _connect_across_restart(address, down_s, lambda: _serve_process(port))
    if lease is not None:
        lease.release()
    server.kill()
    return {
        "mode": "abandoned",
        "abandoned_iterator": abandon,
        "heartbeat": heartbeat,
        "down_s": down_s,
        "connect_returns_s": round(seconds, 3),
    }


def _emit(result: dict, out: Optional[str]) -> None:
    """Prints one result as a JSON line, and appends it to `out` when given."""
    print(json.dumps(result), flush=True)
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(result) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env_name", default="Pendulum-v1")
    p.add_argument("--hparams", default="{}", help="JSON of hyperparameter overrides")
    p.add_argument("--steps_per_call", type=int, default=50, help="the learner's default")
    p.add_argument("--repeats", type=int, default=1, help="fresh processes")
    p.add_argument("--out", default=None, help="append one JSON line per repeat here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--mode", choices=("learner", "channel", "lease", "abandoned"), default="learner"
    )
    p.add_argument(
        "--down_s", type=float, default=30.0, help="channel, lease, abandoned: server downtime"
    )
    args = p.parse_args(argv)
    if args.mode == "lease":
        for _ in range(args.repeats):
            _emit(lease_backoff(args.down_s), args.out)
        return 0
    if args.mode == "abandoned":
        for _ in range(args.repeats):
            for abandon, heartbeat in ((False, False), (True, False), (False, True)):
                _emit(abandoned_backoff(args.down_s, abandon, heartbeat), args.out)
        return 0
    if args.mode == "channel":
        for keep_old in (True, False):
            _emit(channel_backoff(args.down_s, keep_old), args.out)
        return 0
    if args.child:
        result = measure(args.env_name, json.loads(args.hparams), args.steps_per_call)
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    import subprocess

    for _ in range(args.repeats):
        probe = os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "probe.py"
        )
        child = [sys.executable, probe, "recovery_cost", "--child", *(argv or sys.argv[1:])]
        done = subprocess.run(child, capture_output=True, text=True)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        if not lines:
            print(done.stdout[-2000:] + done.stderr[-3000:])
            return 1
        result = dict(json.loads(lines[0][7:]), env_name=args.env_name, hparams=args.hparams)
        print(json.dumps(result), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(result) + "\n")
    return 0
