"""One learner per run (issue 10), with the real server and learner binaries.

A learner that waits for replay data (initial_collect_steps is never reached:
no actor runs) owns the run; a second learner is refused on the same root_dir
(lock file) and on another root_dir with the same server (the server's lease,
as for a learner on another host); after a SIGKILL a new learner takes over.
"""

import json
import os
import signal
import socket
import threading
import time

import portpicker
import pytest
from support.processes import DEADLINE_S, kill_all, read, run, start, stop, wait_for_log

pytestmark = pytest.mark.slow

SMALL = [
    "--env_name=Pendulum-v1",
    "--initial_collect_steps=100000",  # never reached: the learner waits, owning the run
    "--replay_buffer_capacity=200000",
    "--batch_size=32",
    "--actor_fc_layer_params=16,16",
    "--critic_joint_fc_layer_params=16,16",
]
OWNED = "Initial collect: "  # logged once a learner owns the run and waits for data


class Run:
    def __init__(self, root: str):
        self.root = root
        self.port = portpicker.pick_unused_port()
        address = f"localhost:{self.port}"
        self.clients = SMALL + [
            f"--replay_buffer_server_address={address}",
            f"--variable_container_server_address={address}",
            f"--connect_timeout={DEADLINE_S:.0f}",
        ]
        self.procs = {}

    def log(self, name: str) -> str:
        return os.path.join(self.root, f"{name}.log")

    def start_learner(self, name: str, root_dir: str):
        flags = [f"--root_dir={root_dir}", *self.clients]
        self.procs[name] = start("learner", flags, self.log(name))
        return self.procs[name]


@pytest.fixture(scope="module")
def owned_run(tmp_path_factory):
    """A server and learner "first" that owns the run on root_dir `root/run`."""
    r = Run(str(tmp_path_factory.mktemp("ownership")))
    os.makedirs(os.path.join(r.root, "run"))
    server_flags = [f"--root_dir={r.root}/run", *SMALL, f"--port={r.port}"]
    r.procs["server"] = start("reverb_server", server_flags, r.log("server"))
    r.start_learner("first", os.path.join(r.root, "run"))
    wait_for_log(r.log("first"), OWNED, DEADLINE_S, r.procs)
    yield r
    kill_all(r.procs)


def _error(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr[-3000:]
    return lines[0]


def test_second_learner_on_the_same_root_dir_is_refused(owned_run):
    run_dir = os.path.join(owned_run.root, "run")
    info_path = os.path.join(run_dir, "run_info.json")
    with open(info_path) as f:
        info_before = f.read()
    first = owned_run.procs["first"]
    result = run(
        "learner",
        f"--root_dir={run_dir}",
        *owned_run.clients,
        "--batch_size=48",  # its own (not checkpoint-bound) settings must not reach run_info.json
        timeout_s=DEADLINE_S,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    error = _error(result)
    assert f"Another learner owns this run: pid {first.pid} on host {socket.gethostname()}" in (
        error
    )
    assert f"lock file {run_dir}/learner.lock" in error
    assert "Stop that learner first" in error
    assert first.poll() is None  # the owner goes on
    assert read(info_path) == info_before


def test_learner_elsewhere_is_refused_by_the_server_and_a_new_one_takes_over(owned_run, tmp_path):
    first = owned_run.procs["first"]
    # Another root_dir (as on another host): only the server can tell.
    result = run("learner", f"--root_dir={tmp_path}/other", *owned_run.clients, timeout_s=600)
    assert result.returncode == 2, result.stderr[-3000:]
    error = _error(result)
    assert f"Another learner owns this run: pid {first.pid} on host" in error
    assert "the Reverb server's lease" in error
    assert not os.path.exists(os.path.join(tmp_path, "other", "run_info.json"))

    # The owner dies without a word; a learner restarted on its root_dir takes over
    # (the dead learner's lock is released by the kernel and names its lease).
    first.send_signal(signal.SIGKILL)
    first.wait()
    run_dir = os.path.join(owned_run.root, "run")
    second = owned_run.start_learner("second", run_dir)
    wait_for_log(owned_run.log("second"), OWNED, DEADLINE_S, {"second": second})
    assert f"Took over the run from learner pid {first.pid} on host" in read(
        owned_run.log("second")
    )
    wait_for_log(owned_run.log("server"), r"takes over from pid \d+", DEADLINE_S)
    with open(os.path.join(run_dir, "learner.lock")) as f:
        assert json.load(f)["pid"] == second.pid
    assert stop(second) == 0, read(owned_run.log("second"))[-3000:]
    # Stopped cleanly, it gave the run back: the next learner owns it at once.
    wait_for_log(owned_run.log("server"), r"gave the run back", DEADLINE_S)


def test_giving_the_lease_back_to_a_stopped_server_fails_instead_of_hanging():
    """A learner stopping after its server did hung for hours in the lease release."""
    import reverb

    from sac_distributed.jobs import ownership

    port = portpicker.pick_unused_port()
    server = reverb.Server(ownership.make_tables(), port=port)
    me = ownership.Claim(7, "host", os.getpid(), 1, 0, 0)
    ownership._write(reverb.Client(f"localhost:{port}"), ownership.CLAIMS_TABLE, me)
    server.stop()
    outcome = {}

    def give_back():
        try:
            ownership._write(reverb.Client(f"localhost:{port}"), ownership.CLAIMS_TABLE, me)
        except ownership._CLIENT_ERRORS as error:
            outcome["error"] = error

    thread = threading.Thread(target=give_back, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), f"writing to a stopped server still blocks after {DEADLINE_S} s"
    assert "ServerInfo" in str(outcome.get("error")), outcome


def test_the_heartbeat_keeps_no_client_between_beats_with_the_server_up_or_gone(monkeypatch):
    """gRPC keeps one subchannel per address while any channel to it lives. A heartbeat
    client kept from beat to beat held it through a server outage, and the learner's
    reconnect then waited out that subchannel's backoff (16-27 s after the new server
    listened). Between beats the heartbeat must hold no client, server up or gone."""
    import gc

    import reverb

    from sac_distributed.jobs import ownership

    untracked_client = reverb.Client  # the test's own, made before the patch
    # The heartbeat thread's clients (other threads of this process may make some).
    made = _track_clients(monkeypatch, lambda: threading.current_thread().name == "learner-lease")

    live_at_waits = []
    stop_server = threading.Event()

    class WatchedStop(threading.Event):
        def wait(self, timeout=None):
            if stop_server.is_set() and not stopped.is_set():
                # Between beats, so that no beat is cut inside Reverb's sample, which has
                # no deadline (a real SIGKILL can land there too; see Lease._renew).
                server.stop()
                stopped.set()
            gc.collect()
            live_at_waits.append(sum(ref() is not None for ref in made))
            return super().wait(timeout)

    stopped = threading.Event()

    monkeypatch.setattr(ownership, "HEARTBEAT_INTERVAL_S", 0.2)
    port = portpicker.pick_unused_port()
    server = reverb.Server(ownership.make_tables(), port=port)
    lease = ownership.Lease(f"localhost:{port}", ownership.Claim.mine())
    lease._stop = WatchedStop()
    lease._start_heartbeat()

    def wait_for(what, condition):
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            assert time.monotonic() < deadline, f"waited {DEADLINE_S} s for {what}"
            time.sleep(0.05)

    try:
        wait_for("three beats to a live server", lambda: len(made) >= 3)
        claims = untracked_client(f"localhost:{port}").server_info()[ownership.CLAIMS_TABLE]
        assert claims.current_size >= 2  # the beats wrote their claims
        stop_server.set()
        wait_for("the server to stop between beats", stopped.is_set)
        beats_before = len(live_at_waits)
        wait_for("three beats to a gone server", lambda: len(live_at_waits) >= beats_before + 3)
    finally:
        lease._stop.set()
        lease._thread.join(DEADLINE_S)
    assert live_at_waits and all(n == 0 for n in live_at_waits), live_at_waits


def test_claiming_the_lease_keeps_no_client_between_attempts_while_the_server_is_gone(
    monkeypatch,
):
    """The same for the claim a learner makes at its start: a learner started while its
    server restarts must not keep a client (and gRPC's backoff) across its retries."""
    import gc

    from sac_distributed.jobs import ownership

    me = threading.current_thread()
    made = _track_clients(monkeypatch, lambda: threading.current_thread() is me)

    live_at_retries = []
    real_sleep = time.sleep

    def watched_sleep(seconds):
        if threading.current_thread() is me:
            gc.collect()
            live_at_retries.append(sum(ref() is not None for ref in made))
        real_sleep(min(seconds, 0.1))

    monkeypatch.setattr(ownership.time, "sleep", watched_sleep)
    port = portpicker.pick_unused_port()  # nothing listens there
    lease = ownership.Lease(f"localhost:{port}", ownership.Claim.mine())
    assert lease.acquire(lambda: len(live_at_retries) >= 3) is False
    assert len(made) >= 3, "each attempt asks with a client of its own"
    assert live_at_retries == [0, 0, 0], live_at_retries


def _track_clients(monkeypatch, counted):
    """Patches reverb.Client so that each client made while `counted()` holds is listed
    (as a weak reference) in the returned list."""
    import weakref

    import reverb

    made = []

    class TrackedClient(reverb.Client):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if counted():
                made.append(weakref.ref(self))

    monkeypatch.setattr(reverb, "Client", TrackedClient)
    return made
