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


def test_recover_drops_the_old_clients_before_it_connects_anew(monkeypatch):
    port = portpicker.pick_unused_port()
    address = f"localhost:{port}"
    server = _serve(port)
    config = config_lib.ClientConfig(address, address, connect_timeout_s=DEADLINE_S)
    connection = connection_lib.Connection(config, "the test", lambda: False)
    connection.open()
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
