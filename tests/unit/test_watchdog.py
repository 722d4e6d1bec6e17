"""The learner's watchdog on a real Reverb server: a long training call that keeps
taking replay samples (a learner waiting on slow actors, as a rendered env on busy
CPUs makes it) runs on past the stall timeout, while one that takes none for that
long is taken for a stream stuck on a restarted server."""

from __future__ import annotations

import time

import numpy as np
import pytest
import reverb

from sac_distributed.jobs import watchdog as watchdog_lib
from sac_distributed.replay import REPLAY_TABLE

STALL_S = 2.0


@pytest.fixture
def replay(monkeypatch):
    monkeypatch.setattr(watchdog_lib, "STALL_TIMEOUT_S", STALL_S)
    monkeypatch.setattr(watchdog_lib, "HEALTH_CHECK_INTERVAL_S", 0.25)
    table = reverb.Table(
        REPLAY_TABLE,
        sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(),
        max_size=10,
        rate_limiter=reverb.rate_limiters.MinSize(1),
    )
    server = reverb.Server([table], port=None)
    client = reverb.Client(f"localhost:{server.port}")
    client.insert([np.zeros(2, np.float32)], {REPLAY_TABLE: 1.0})
    yield server, client
    server.stop()


def _traced(watchdog: watchdog_lib.Watchdog) -> None:
    watchdog.call("train", lambda: None)  # the name has completed a call: it has traced


def test_a_call_that_keeps_sampling_runs_past_the_stall_timeout(replay):
    server, client = replay
    watchdog = watchdog_lib.Watchdog([f"localhost:{server.port}"])
    _traced(watchdog)

    def slow_but_sampling():
        deadline = time.monotonic() + 3 * STALL_S
        samples = 0
        while time.monotonic() < deadline:
            list(client.sample(REPLAY_TABLE, num_samples=1))
            samples += 1
            time.sleep(0.2)
        return samples

    assert watchdog.call("train", slow_but_sampling) > 10


def test_a_call_that_takes_no_sample_for_the_stall_timeout_is_a_lost_server(replay):
    server, _ = replay
    watchdog = watchdog_lib.Watchdog([f"localhost:{server.port}"])
    _traced(watchdog)
    started = time.monotonic()
    with pytest.raises(watchdog_lib.ServerLostError, match="took no replay sample"):
        watchdog.call("train", lambda: time.sleep(10 * STALL_S))
    assert time.monotonic() - started < 8 * STALL_S


def test_a_sample_count_that_falls_is_a_restart_not_progress():
    progress = watchdog_lib._Progress(started=0.0)
    progress.saw({"a": 100}, now=1.0)  # the first count is the baseline
    assert progress.last == 0.0
    progress.saw({"a": 5}, now=2.0)  # the server restarted with fewer samples
    assert progress.last == 0.0
    progress.saw({"a": 6}, now=3.0)
    assert progress.last == 3.0
