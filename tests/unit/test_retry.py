"""retry.retry: backoff between attempts, the deadline, stops, and which errors it retries."""

import time

import pytest

from sac_distributed import retry as retry_lib
from sac_distributed.retry import retry


class Flaky:
    """Raises ValueError(i) on its first `failures` calls i = 0, 1, ..., then returns "ok"."""

    def __init__(self, failures: int):
        self.failures = failures
        self.remaining = []  # the seconds left that each call was given

    def __call__(self, remaining_s: float) -> str:
        self.remaining.append(remaining_s)
        if len(self.remaining) <= self.failures:
            raise ValueError(len(self.remaining) - 1)
        return "ok"


@pytest.fixture
def sleeps(monkeypatch):
    """The delays retry asks for, in order (it still sleeps them)."""
    asked = []
    real_sleep = time.sleep

    def record(seconds: float) -> None:
        asked.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(retry_lib.time, "sleep", record)
    return asked


def test_retries_until_the_call_succeeds_with_doubling_capped_delays(sleeps):
    attempt = Flaky(failures=4)
    retried = []
    result = retry(
        attempt,
        (ValueError,),
        timeout_s=60,
        initial_delay_s=0.01,
        max_delay_s=0.04,
        on_retry=lambda error, remaining: retried.append((str(error), remaining)),
    )
    assert result == "ok"
    assert sleeps == [0.01, 0.02, 0.04, 0.04]
    assert [error for error, _ in retried] == ["0", "1", "2", "3"]
    assert all(0 < remaining <= 60 for _, remaining in retried)
    # Each attempt is told how long is left, less and less.
    assert len(attempt.remaining) == 5
    assert 0 < attempt.remaining[-1] < attempt.remaining[0] <= 60


def test_after_the_deadline_the_last_error_is_raised():
    attempt = Flaky(failures=10**6)
    start = time.monotonic()
    with pytest.raises(ValueError) as raised:
        retry(attempt, (ValueError,), timeout_s=0.2, initial_delay_s=0.01, max_delay_s=0.02)
    assert time.monotonic() - start >= 0.2
    assert len(attempt.remaining) > 1
    assert str(raised.value) == str(len(attempt.remaining) - 1)  # the last attempt's


def test_a_sleep_never_outlasts_the_deadline(sleeps):
    with pytest.raises(ValueError):
        retry(Flaky(failures=10**6), (ValueError,), timeout_s=0.05, initial_delay_s=10.0)
    assert len(sleeps) == 1 and sleeps[0] <= 0.05


def test_other_errors_propagate_at_once(sleeps):
    def attempt(_: float) -> None:
        raise KeyError("not retried")

    with pytest.raises(KeyError):
        retry(attempt, (ValueError,), timeout_s=60)
    assert sleeps == []


def test_a_stop_ends_the_retries_with_the_last_error(sleeps):
    attempt = Flaky(failures=10**6)
    retried = []
    with pytest.raises(ValueError, match="^0$"):
        retry(
            attempt,
            (ValueError,),
            timeout_s=60,
            should_stop=lambda: True,
            on_retry=lambda error, remaining: retried.append(error),
        )
    assert len(attempt.remaining) == 1 and retried == [] and sleeps == []
