"""The learner's traced update functions, and spares traced ahead for a reconnect.

A training call left behind on a lost server keeps running its tf.function
(the watchdog cannot interrupt it), and TensorFlow 2.15 runs a second call of
that same function only after the first ends: never. So after a reconnect the
learner needs functions other than the abandoned ones. Tracing new ones costs
seconds of CPU on the reconnect's path (`benchmarks/probe.py recovery_cost`);
`TracedFunctions.trace_spares` does that work ahead, while training is healthy,
and `swap` puts the spares in place at once.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import tensorflow as tf


def traced(fn):
    """tf.function without autograph: SacAgent's update has only static Python
    control flow, and converting it made tracing ~7x slower (about 19 s instead
    of under 3 s for Pendulum-v1 on 2 cores), which every start and every
    reconnect pays."""
    return tf.function(fn, autograph=False)


class TracedFunctions:
    """Named traced functions of (iterator, ...), each with an optional spare.

    `bodies` maps a name to `(python_fn, takes_num_steps)`: the update loops take
    `(iterator, num_steps)` and run `num_steps` updates; the others take
    `(iterator)` and read one batch.
    """

    def __init__(self, bodies: Dict[str, Tuple[Callable, bool]]):
        self._bodies = dict(bodies)
        self._current = {name: traced(fn) for name, (fn, _) in self._bodies.items()}
        self._spares: Dict[str, object] = {}

    def __getitem__(self, name: str):
        return self._current[name]

    @property
    def spares_ready(self) -> bool:
        """Every function in use has a spare."""
        return all(name in self._spares for name in self._in_use())

    def trace_spares(self, iterator) -> int:
        """Traces a spare of each function in use that has none; returns how many.

        An update loop's spare also runs once with num_steps 0 on `iterator`: that
        builds its graph (most of a first call's cost) without reading a batch. A
        one-batch function is only traced, so nothing is read from the replay.
        """
        made = 0
        for name in self._in_use():
            if name in self._spares:
                continue
            fn, takes_num_steps = self._bodies[name]
            spare = traced(fn)
            if takes_num_steps:
                spare(iterator, tf.constant(0))
            else:
                spare.get_concrete_function(iterator)
            self._spares[name] = spare
            made += 1
        return made

    def swap(self) -> bool:
        """Replaces every function: by its spare where there is one, else by a new one
        that traces on its first call. True when every function in use had a spare."""
        ready = self.spares_ready
        for name, (fn, _) in self._bodies.items():
            self._current[name] = self._spares.pop(name, None) or traced(fn)
        return ready

    def tracing_counts(self) -> Dict[str, int]:
        """How often each current function traced (a spare: once, before its swap)."""
        return {name: fn.experimental_get_tracing_count() for name, fn in self._current.items()}

    def _in_use(self):
        return [n for n, fn in self._current.items() if fn.experimental_get_tracing_count()]
