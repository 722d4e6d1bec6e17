"""One way to retry a call while a server is away: capped backoff within a deadline.

`retry` calls a function until it returns, sleeping between attempts (each
delay twice the previous, up to a cap), and gives up by re-raising the last
error once the deadline passes or a stop is requested. Errors it was not told
to retry propagate at once. `replay.connect` waits for a Reverb server with
it (and `connection.Connection` opens and reconnects through that), and the
learner waits with it for a restarted server's dataset.
"""

from __future__ import annotations

import time
from typing import Callable, Optional, Tuple, Type, TypeVar

T = TypeVar("T")


def retry(
    attempt: Callable[[float], T],
    retry_on: Tuple[Type[BaseException], ...],
    timeout_s: float,
    should_stop: Callable[[], bool] = lambda: False,
    initial_delay_s: float = 0.2,
    max_delay_s: float = 5.0,
    on_retry: Optional[Callable[[BaseException, float], None]] = None,
) -> T:
    """What `attempt` returns, retried after `retry_on` errors until `timeout_s`.

    Args:
      attempt: called with the seconds left before the deadline, so that it
        can bound its own waiting (an RPC timeout) by them.
      retry_on: the error types worth another attempt; any other propagates.
      timeout_s: seconds from now after which the last error is re-raised.
      should_stop: checked after every failed attempt; once true, the last
        error is re-raised without waiting further.
      initial_delay_s: the sleep after the first failure.
      max_delay_s: the cap on sleeps (equal to `initial_delay_s`: a fixed delay).
      on_retry: called with the error and the seconds left before each sleep,
        to say what is being waited for.

    Returns:
      The result of the first attempt that did not raise.
    """
    deadline = time.monotonic() + timeout_s
    delay = initial_delay_s
    while True:
        try:
            return attempt(deadline - time.monotonic())
        except retry_on as error:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or should_stop():
                raise
            if on_retry is not None:
                on_retry(error, remaining)
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, max_delay_s)
