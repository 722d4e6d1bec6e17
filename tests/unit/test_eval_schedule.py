"""The evaluator's schedule: one row per multiple of eval_interval, no drift."""

import sac_distributed  # noqa: F401  (must come before tensorflow)
from sac_distributed.jobs.evaluation import eval_due


def _schedule(observed_steps, interval, done_at=None):
    """The train steps an evaluator evaluates when it sees `observed_steps` in order."""
    last = None
    evaluated = []
    for step in observed_steps:
        if eval_due(step, last, interval, learner_done=step == done_at):
            evaluated.append(step)
            last = step
    return evaluated


def test_late_evaluations_do_not_shift_the_schedule():
    # A slow evaluator first sees 2200 (not 2000), then 4100, then 6300: with
    # "last + interval" the next would be due at 6300 + 2000 = 8300, not 8000.
    observed = [0, 2200, 3000, 4100, 6300, 7900, 8000, 9999, 10050]
    assert _schedule(observed, 2000) == [0, 2200, 4100, 6300, 8000, 10050]


def test_first_weights_and_final_weights_are_always_evaluated():
    assert _schedule([137, 500, 650], 1000, done_at=650) == [137, 650]
    assert _schedule([1000, 1000], 1000, done_at=1000) == [1000]


def test_a_skipped_multiple_gives_one_row_not_two():
    # The learner moved from 1900 past both 2000 and 4000 between two polls.
    assert _schedule([0, 1900, 4500, 5000, 6000], 2000) == [0, 4500, 6000]
