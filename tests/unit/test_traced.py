"""Spare traced functions (algorithm/traced.py): traced ahead, swapped in without
tracing, and free of a call abandoned on the functions they replace."""

import threading

import tensorflow as tf

from sac_distributed.algorithm.traced import TracedFunctions

DEADLINE_S = 120


def _ones_dataset(block=None):
    """Ones; with `block`, waits on it after the first."""

    def gen():
        while True:
            yield 1.0
            if block is not None:
                block.wait()

    return tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([], tf.float32))


def _functions(total):
    def update(iterator, num_steps):
        def body(i, s):
            x = next(iterator)
            total.assign_add(x)
            return i + 1, s + x

        start = (tf.constant(0, num_steps.dtype), tf.constant(0.0))
        return tf.while_loop(lambda i, _: i < num_steps, body, start)[1]

    def one_batch(iterator):
        return next(iterator) * 2.0

    return TracedFunctions({"train": (update, True), "diagnostics": (one_batch, False)})


def test_spares_are_traced_ahead_read_nothing_and_swap_in_without_tracing():
    total = tf.Variable(0.0)
    functions = _functions(total)
    iterator = iter(_ones_dataset())
    assert float(functions["train"](iterator, tf.constant(3))) == 3.0
    assert not functions.spares_ready

    # Only what has been called gets a spare: the diagnostics never ran.
    assert functions.trace_spares(iterator) == 1
    assert functions.spares_ready and functions.trace_spares(iterator) == 0
    assert float(total) == 3.0  # no update ran: no batch was read

    assert functions.swap() is True
    assert functions.tracing_counts() == {"train": 1, "diagnostics": 0}  # traced before use
    new_iterator = iter(_ones_dataset())
    assert float(functions["train"](new_iterator, tf.constant(2))) == 2.0
    assert functions.tracing_counts()["train"] == 1  # no trace on the way back

    # Spares are used up: the next swap puts fresh functions in place, traced on call.
    assert functions.swap() is False
    assert functions.tracing_counts()["train"] == 0


def test_a_spare_runs_while_an_abandoned_call_of_the_old_function_hangs():
    """The reason for spares: TensorFlow runs a second call of a function only after
    the first ends, so a call left hanging on a dead stream blocks its function."""
    total = tf.Variable(0.0)
    functions = _functions(total)
    functions["train"](iter(_ones_dataset()), tf.constant(1))
    functions.trace_spares(iter(_ones_dataset()))
    old = functions["train"]
    block = threading.Event()
    hanging = iter(_ones_dataset(block))
    abandoned = threading.Thread(target=lambda: old(hanging, tf.constant(5)), daemon=True)
    abandoned.start()
    try:
        assert functions.swap()
        done = threading.Event()
        result = {}

        def call_spare():
            result["value"] = float(functions["train"](iter(_ones_dataset()), tf.constant(4)))
            done.set()

        threading.Thread(target=call_spare, daemon=True).start()
        assert done.wait(DEADLINE_S), f"the spare did not finish in {DEADLINE_S} s"
        assert result["value"] == 4.0
        assert abandoned.is_alive()  # still hanging on its stream all along
    finally:
        block.set()  # let the abandoned call end, so the process exits cleanly
        abandoned.join(timeout=DEADLINE_S)
