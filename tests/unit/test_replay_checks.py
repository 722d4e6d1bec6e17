"""replay/counts.py and replay/checks.py: counts in transitions, and the start-up
check of a job against the server's tables (sizes, K, naming both sides)."""

import time

import pytest
import reverb
from support.training import small_hparams

from sac_distributed import replay
from sac_distributed.errors import SignatureMismatchError

K = 4
DEADLINE_S = 60.0


def _poll_counts(client: reverb.Client, until) -> replay.TransitionCounts:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        counts = replay.transition_counts(replay.table_info(client, replay.REPLAY_TABLE))
        if until(counts):
            return counts
        assert time.monotonic() < deadline, f"counts stayed at {counts} for {DEADLINE_S} s"
        time.sleep(0.05)


def test_transition_counts_are_items_times_the_tables_k(new_server, write_replay):
    server = new_server(small_hparams(transitions_per_item=K))
    try:
        client = server.localhost_client()
        write_replay(client, 64)  # 16 items: the warm-up the rate limiter waits for
        assert _poll_counts(client, lambda c: c.inserted == 64) == (64, 64, 0)
        samples = list(client.sample(replay.REPLAY_TABLE, num_samples=2))
        assert len(samples) == 2
        counts = _poll_counts(client, lambda c: c.sampled == 2 * K)
        assert counts == replay.TransitionCounts(stored=64, inserted=64, sampled=2 * K)
    finally:
        server.stop()


# --- the start-up check ----------------------------------------------------------------


def _check(server: reverb.Server, env_specs, **hparams) -> None:
    client = server.localhost_client()
    replay.check_server_tables(client, client, env_specs, small_hparams(**hparams), "actor 0")


def test_a_job_built_like_the_server_passes_the_check(reverb_server, env_specs):
    _check(reverb_server, env_specs)  # raises if it does not


def test_an_actor_with_other_network_sizes_is_refused_naming_both(reverb_server, env_specs):
    with pytest.raises(SignatureMismatchError) as raised:
        _check(reverb_server, env_specs, actor_fc_layer_params=(32, 32))
    message = str(raised.value)
    assert "The actor 0's policy variable spec" in message
    assert replay.VARIABLE_TABLE in message
    assert "float32[3, 32]" in message  # the actor's first layer
    assert "float32[3, 16]" in message  # the server's
    assert "actor_fc_layer_params" in message


def test_an_actor_with_another_k_is_refused_naming_both(reverb_server, env_specs):
    with pytest.raises(SignatureMismatchError) as raised:
        _check(reverb_server, env_specs, transitions_per_item=K)
    message = str(raised.value)
    assert f"The actor 0 runs with transitions_per_item={K}" in message
    assert "stores 1 transitions per item" in message
    assert "--transitions_per_item=1" in message
