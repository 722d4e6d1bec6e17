"""A job's clients across a server restart: no channel that asked the dead server is kept.

gRPC shares one subchannel, and its reconnect backoff, among all channels of a
process to one address, so a new client connects at once only when the old
ones are gone (benchmarks/probe.py recovery_cost --mode=channel measures it).
"""

from __future__ import annotations

import threading
import weakref

import portpicker
import reverb

from sac_distributed import config as config_lib
from sac_distributed.replay import connection as connection_lib

DEADLINE_S = 120


def _serve(port: int) -> reverb.Server:
    return reverb.Server([reverb.Table.queue("t", 10)], port=port)


def test_connect_asks_each_time_with_a_new_client_and_keeps_none_of_the_failed(monkeypatch):
    made = []

    class RecordingClient(reverb.Client):
        def __init__(self, address: str):
            super().__init__(address)
            made.append(weakref.ref(self))

    monkeypatch.setattr(reverb, "Client", RecordingClient)
    port = portpicker.pick_unused_port()
    servers = []
    # Nothing listens yet: connect keeps asking until the server starts, later
    # than its first attempt's own timeout (5 s).
    starter = threading.Timer(7.0, lambda: servers.append(_serve(port)))
    starter.start()
    try:
        client = connection_lib.connect(f"localhost:{port}", DEADLINE_S, "the test")
        assert len(made) >= 2, "connect answered at its first attempt: the test proved nothing"
        assert made[-1]() is client
        assert [ref() for ref in made[:-1]] == [None] * (len(made) - 1)
        client.server_info(timeout=5)
    finally:
        starter.join()
        for server in servers:
            server.stop()


def _open_connection():
    """A server on a free port and a job's connection to it: (port, server, connection)."""
    port = portpicker.pick_unused_port()
    address = f"localhost:{port}"
    server = _serve(port)
    config = config_lib.ClientConfig(address, address, connect_timeout_s=DEADLINE_S)
    connection = connection_lib.Connection(config, "the test", lambda: False)
    connection.open()
    return port, server, connection


def test_recover_drops_the_old_clients_before_it_connects_anew(monkeypatch):
    port, server, connection = _open_connection()
    old = [weakref.ref(connection.replay), weakref.ref(connection.variables)]
    old_alive_at_connect = []
    real_connect = connection_lib.connect

    def spying_connect(*args, **kwargs):
        old_alive_at_connect.append([ref() is not None for ref in old])
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(connection_lib, "connect", spying_connect)
    server.stop()
    server = _serve(port)

    def fail(client: reverb.Client) -> None:  # a call that held the client when it failed
        raise RuntimeError(f"the server went away from {client}")

    try:
        try:
            fail(connection.replay)
        except RuntimeError as error:
            connection.recover(error)
        assert old_alive_at_connect == [[False, False], [False, False]]
        connection.replay.server_info(timeout=5)
        connection.variables.server_info(timeout=5)
    finally:
        server.stop()


def test_recover_drops_the_client_of_the_call_the_error_was_raised_from(monkeypatch):
    """The learner's watchdog raises ServerLostError from the failed ping; the ping's frames,
    reached through the error's cause, held its client (and gRPC's shared subchannel,
    backing off) through the outage, and the learner's reconnect waited it out."""
    port, server, connection = _open_connection()
    address = f"localhost:{port}"
    pinging = []
    alive_at_connect = []
    real_connect = connection_lib.connect

    def spying_connect(*args, **kwargs):
        alive_at_connect.append(pinging[0]() is not None)
        return real_connect(*args, **kwargs)

    def ping(client: reverb.Client) -> None:  # as the watchdog's: the client a local
        pinging.append(weakref.ref(client))
        raise reverb.errors.DeadlineExceededError("ServerInfo call did not complete")

    monkeypatch.setattr(connection_lib, "connect", spying_connect)
    server.stop()
    server = _serve(port)
    try:
        try:
            try:
                ping(reverb.Client(address))
            except reverb.errors.DeadlineExceededError as error:
                raise ConnectionError("the server stopped answering") from error
        except ConnectionError as lost:
            connection.recover(lost)
        assert alive_at_connect == [False, False]
    finally:
        server.stop()


def test_a_job_started_while_its_server_restarts_checks_the_tables_on_the_new_one(
    env_specs, tmp_path
):
    """Chaos found an actor that exited 1 ("Socket closed") when its server was killed
    between its connect and its table check; the check now waits for the server again."""
    from support.training import ENV_NAME, small_hparams

    from sac_distributed import jobs
    from sac_distributed.jobs.server import make_server

    hparams = small_hparams()
    port = portpicker.pick_unused_port()
    address = f"localhost:{port}"
    server_config = config_lib.ServerConfig(ENV_NAME, hparams, str(tmp_path), port=port)
    servers = [make_server(server_config, port)]
    config = config_lib.ClientConfig(address, address, connect_timeout_s=DEADLINE_S)
    connection = connection_lib.Connection(config, "actor 0", lambda: False)
    connection.open()
    servers[0].stop()  # lost after the connect, before the check
    restart = threading.Timer(2.0, lambda: servers.append(make_server(server_config, port)))
    restart.start()
    try:
        jobs._check_server_tables(connection, env_specs, hparams, "actor 0")  # noqa: SLF001
        assert connection.reconnects == 1
    finally:
        restart.join()
        for server in servers[1:]:
            server.stop()
