"""The pixel replay: each camera frame stored once, stacks rebuilt when sampled.

A vector transition is one flat float32 row (layout.py). A pixel transition
(s, a, r, discount, s') of stacked frames would store 2 x frame_stack frames
that its neighbours store again; here each env step appends one row holding
its newest frame (uint8) and the action, reward and discount that led to it,
and an item references the rows it needs: the frame_stack + K frames behind K
consecutive transitions, and their K actions, rewards and discounts. Reverb
keeps each row's data once however many items reference it, so a transition
costs about one frame (benchmarks/results/pixel_replay_bytes). A new episode
starts with frame_stack rows holding the reset frame, the padded stack of the
first observation (`envs.pixels.FrameStack`), so no item crosses episodes. A
camera with a state ({"pixels", "state"}, envs/observations.py) stores each
step's state vector in the same row as its frame: an item's K + 1 newest states
are its transitions' s and s' states.

With n-step returns (n > 1) an item's transitions reach n steps ahead: it
references frame_stack + K + n - 1 frames, s of transition j being frames
j .. j + S - 1 and its s' frames j + n .. j + n + S - 1. Each step's row then
carries the n-step reward and discount (nstep.n_step_return, folded by the
actor as the vector path does) of the transition that starts n - 1 steps
before it, so an item's rewards are still its last K rows'. A terminated
episode's last n - 1 transitions are completed over fewer steps by padding rows
(discount 0, so their s' is never used); a time limit drops them, as DrQ-v2's
replay does, since their s' would need frames the episode never rendered.

`FrameLayout` is the item's layout (its signature, and the `Transition` that the
learner's dataset makes of sampled items); `FrameWriter` writes one stream of
rows per env, each through its own Reverb TrajectoryWriter.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Deque, Dict, List, Mapping, Optional, Tuple

import numpy as np
import reverb
import tensorflow as tf
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from sac_distributed.envs.observations import PIXELS, STATE
from sac_distributed.envs.pixels import camera_pixels
from sac_distributed.envs.specs import EnvSpecs
from sac_distributed.replay.nstep import n_step_return

# The columns of a pixel replay item.
FRAMES = "frames"  # uint8 [frame_stack + K, H, W, C]
ACTIONS = "actions"  # [K, action...]
REWARDS = "rewards"  # float32 [K]
DISCOUNTS = "discounts"  # float32 [K]
STATES = "states"  # float32 [K + 1, D]: a camera's state vectors, when it has them
# How the frames column's name starts: it records the layout for error messages.
FRAMES_OF = "frames of "


@dataclasses.dataclass(frozen=True)
class FrameLayout:
    """Where a pixel transition's parts sit in a replay item (see the module doc)."""

    frame_shape: tuple  # (H, W, C) of one frame
    frame_stack: int
    action_shape: tuple
    action_dtype: tf.dtypes.DType
    state_size: int = 0  # floats of the state beside each frame (0: images alone)
    n_step: int = 1  # steps each transition's reward sums (its s' is n steps on)

    @property
    def frame_channels(self) -> int:
        return int(self.frame_shape[-1])

    @property
    def observation_shape(self) -> tuple:
        height, width, channels = self.frame_shape
        return (height, width, channels * self.frame_stack)

    def describe(self) -> str:
        """E.g. 'frames of uint8[84, 84, 3], stack 3 (action: float32[6], reward, discount)'."""
        state = f"state: float32[{self.state_size}], " if self.state_size else ""
        n_step = f", {self.n_step}-step" if self.n_step > 1 else ""
        return (
            f"{FRAMES_OF}uint8{list(self.frame_shape)}, stack {self.frame_stack}{n_step} "
            f"({state}action: {self.action_dtype.name}{list(self.action_shape)}, reward, "
            "discount)"
        )

    def signature(self, transitions_per_item: Optional[int]) -> Dict[str, tf.TensorSpec]:
        """One item of K transitions (None: any K, for `signatures_match`)."""
        k = transitions_per_item
        frames = None if k is None else self.frame_stack + k + self.n_step - 1
        signature = {
            FRAMES: tf.TensorSpec((frames, *self.frame_shape), tf.uint8, self.describe()),
            ACTIONS: tf.TensorSpec((k, *self.action_shape), self.action_dtype, ACTIONS),
            REWARDS: tf.TensorSpec((k,), tf.float32, REWARDS),
            DISCOUNTS: tf.TensorSpec((k,), tf.float32, DISCOUNTS),
        }
        if self.state_size:
            states = None if k is None else k + self.n_step
            signature[STATES] = tf.TensorSpec((states, self.state_size), tf.float32, STATES)
        return signature

    def newest_frame(self, observation: Any) -> np.ndarray:
        """The last frame of a stacked observation (H, W, stack x C)."""
        return camera_pixels(observation)[..., -self.frame_channels :]

    def frames_of(self, observation: Any) -> List[np.ndarray]:
        """The frames of a stacked observation, oldest first."""
        c = self.frame_channels
        pixels = camera_pixels(observation)
        return [pixels[..., i * c : (i + 1) * c] for i in range(self.frame_stack)]

    def state_of(self, observation: Any) -> np.ndarray:
        """The state vector of a camera observation with one (float32 [D])."""
        return np.asarray(observation[STATE], np.float32).reshape(self.state_size)

    def to_transition(self, items: Mapping[str, tf.Tensor]) -> trajectory.Transition:
        """A batch of N sampled items as a `Transition` of N x K stacked transitions."""
        frames = items[FRAMES]  # [N, S + K + n - 1, H, W, C]
        k = items[REWARDS].shape[1]
        s, n = self.frame_stack, self.n_step
        observation = self._stacked(tf.stack([frames[:, j : j + s] for j in range(k)], 1))
        next_observation = self._stacked(
            tf.stack([frames[:, j + n : j + n + s] for j in range(k)], 1)
        )
        if self.state_size:
            states = items[STATES]  # [N, K + n, D]
            observation = {PIXELS: observation, STATE: self._flat_states(states[:, :k])}
            next_observation = {
                PIXELS: next_observation,
                STATE: self._flat_states(states[:, n : n + k]),
            }
        action = tf.reshape(items[ACTIONS], [-1, *self.action_shape])
        reward = tf.reshape(items[REWARDS], [-1])
        discount = tf.reshape(items[DISCOUNTS], [-1])
        mid = tf.fill(tf.shape(reward), ts.StepType.MID)
        time_step = ts.TimeStep(mid, tf.zeros_like(reward), tf.ones_like(reward), observation)
        next_time_step = ts.TimeStep(mid, reward, discount, next_observation)
        return trajectory.Transition(
            time_step, policy_step.PolicyStep(action, (), ()), next_time_step
        )

    def _flat_states(self, states: tf.Tensor) -> tf.Tensor:
        return tf.reshape(states, [-1, self.state_size])

    def _stacked(self, frames: tf.Tensor) -> tf.Tensor:
        """[N, K, S, H, W, C] frames as [N x K, H, W, S x C] observations, oldest first."""
        stacked = tf.transpose(frames, [0, 1, 3, 4, 2, 5])
        return tf.reshape(stacked, [-1, *self.observation_shape])


def frame_layout(specs: EnvSpecs, n_step: int = 1) -> FrameLayout:
    """The pixel replay layout of an env with image observations."""
    return FrameLayout(
        frame_shape=specs.frame_shape,
        frame_stack=specs.frame_stack,
        action_shape=tuple(specs.action.shape.as_list()),
        action_dtype=tf.as_dtype(specs.action.dtype),
        state_size=specs.state_size,
        n_step=n_step,
    )


class _Stream:
    """One env's rows: its Reverb writer and where its episode stands."""

    def __init__(self, client: reverb.Client, keep: int):
        self.writer = client.trajectory_writer(num_keep_alive_refs=keep)
        self.windows = 0  # transitions of this episode whose n steps are all written
        self.pending: Deque[Tuple[float, float]] = collections.deque()  # (r, d) of < n steps
        self.last = None  # the episode's newest row (frame, state), repeated by padding
        self.unconfirmed = 0  # items created since the last completed flush
        self.started = False


class FrameWriter:
    """Writes pixel transitions, one stream of rows per env, K transitions per item.

    The interface the actor's writer uses (`throttle`, `flush`, `close`, the
    counts in transitions) is `writer.TransitionWriter`'s. `write_step` takes a
    whole transition of stacked observations and stores only what is new; an
    episode's last transitions that do not fill an item of K are not stored
    (with K = 1, none), and neither are the last n - 1 of an episode cut by a
    time limit (n-step returns); both count as `transitions_incomplete`.
    `gamma` discounts the n-step returns (needed when the layout's n_step > 1).
    """

    def __init__(
        self,
        client: reverb.Client,
        layout: FrameLayout,
        transitions_per_item: int,
        num_streams: int = 1,
        max_items_in_flight: int = 16,
        priority: float = 1.0,
        table: str = "",
        gamma: Optional[float] = None,
    ):
        from sac_distributed.replay.signatures import REPLAY_TABLE  # signatures imports this

        if layout.n_step > 1 and gamma is None:
            raise ValueError(f"A {layout.n_step}-step FrameWriter needs the discount gamma.")
        self._table = table or REPLAY_TABLE
        self._layout = layout
        self._k = int(transitions_per_item)
        self._gamma = 1.0 if gamma is None else float(gamma)
        keep = layout.frame_stack + self._k + layout.n_step - 1
        self._streams = [_Stream(client, keep) for _ in range(num_streams)]
        self._max_in_flight = max_items_in_flight
        self._transitions_written = 0
        self._incomplete = 0
        self._unconfirmed_at_close = 0
        self._closed = False
        self.priority = float(priority)

    @property
    def transitions_per_item(self) -> int:
        return self._k

    @property
    def transitions_written(self) -> int:
        return self._transitions_written

    items_written = transitions_written

    @property
    def transitions_unconfirmed(self) -> int:
        return self._unconfirmed_at_close

    @property
    def transitions_incomplete(self) -> int:
        return self._incomplete

    def write_step(
        self,
        stream: int,
        observation: np.ndarray,
        action: np.ndarray,
        reward: float,
        discount: float,
        next_observation: np.ndarray,
    ) -> None:
        """Env `stream`'s transition; an item every K transitions of an episode
        (with n-step returns, once their n steps are written)."""
        s = self._streams[stream]
        layout = self._layout
        if not s.started:  # the episode's first transition: its padded first stack
            for frame in layout.frames_of(observation):
                row = {FRAMES: frame}
                if layout.state_size:  # s's state; the newest padding row is s's row
                    row[STATES] = layout.state_of(observation)
                s.writer.append(row)
            s.started, s.windows = True, 0
            s.pending.clear()
        s.last = {FRAMES: layout.newest_frame(next_observation)}
        if layout.state_size:
            s.last[STATES] = layout.state_of(next_observation)
        s.pending.append((float(reward), float(discount)))
        self._append(s, np.asarray(action, layout.action_dtype.as_numpy_dtype))

    def _append(self, s: _Stream, action: np.ndarray) -> None:
        """One row: `s.last`'s frame (and state), `action`, and the n-step reward and
        discount of the oldest pending step once n are pending (else zeros)."""
        reward, discount = 0.0, 0.0
        complete = len(s.pending) == self._layout.n_step
        if complete:
            reward, discount = n_step_return(*zip(*s.pending), gamma=self._gamma)
            s.pending.popleft()
        row = {
            **s.last,
            ACTIONS: action,
            REWARDS: np.float32(reward),
            DISCOUNTS: np.float32(discount),
        }
        s.writer.append(row)
        if complete:
            s.windows += 1
            if s.windows % self._k == 0:
                self._create_item(s)

    def _create_item(self, s: _Stream) -> None:
        history = s.writer.history
        k, n = self._k, self._layout.n_step
        item = {
            FRAMES: history[FRAMES][-(self._layout.frame_stack + k + n - 1) :],
            ACTIONS: history[ACTIONS][-(k + n - 1) :][:k],
            REWARDS: history[REWARDS][-k:],
            DISCOUNTS: history[DISCOUNTS][-k:],
        }
        if self._layout.state_size:
            item[STATES] = history[STATES][-(k + n) :]
        s.writer.create_item(self._table, self.priority, item)
        s.unconfirmed += 1
        self._transitions_written += k

    def end_episode(self, stream: int) -> None:
        """The env's episode ended: its next transition starts a new stack. With
        n-step returns, a terminated episode's pending transitions are completed
        over the steps they have (padding rows after it, discount 0)."""
        s = self._streams[stream]
        if not s.started:
            return
        dropped = len(s.pending)
        if s.pending and s.pending[-1][1] == 0.0:  # terminated: finish the short returns
            pad = np.zeros(self._layout.action_shape, self._layout.action_dtype.as_numpy_dtype)
            for _ in range(self._layout.n_step - 1):  # each pending start's window ends here
                s.pending.append((0.0, 0.0))
                self._append(s, pad)
            dropped = 0
        self._incomplete += s.windows % self._k + dropped
        s.pending.clear()
        s.started = False

    def throttle(self, timeout_ms: int = 1000) -> bool:
        """As TransitionWriter.throttle, for each stream."""
        for s in self._streams:
            if s.unconfirmed < self._max_in_flight:
                continue
            try:
                s.writer.flush(block_until_num_items=2 * self._max_in_flight, timeout_ms=timeout_ms)
            except reverb.errors.DeadlineExceededError:
                return False
            s.unconfirmed = 0
        return True

    def flush(self, timeout_ms: Optional[int] = None) -> bool:
        """Sends every created item; False if the server did not confirm in time."""
        if timeout_ms is not None:
            timeout_ms = max(1, timeout_ms)
        for s in self._streams:
            try:
                s.writer.flush(timeout_ms=timeout_ms)
            except reverb.errors.DeadlineExceededError:
                return False
            s.unconfirmed = 0
        return True

    def close(self, timeout_ms: int = 5_000) -> int:
        """Sends what it can within `timeout_ms` and closes; transitions not confirmed.

        Items still pending count as unconfirmed (each stream's, K transitions
        each), and the unfinished episodes' last transitions as incomplete.
        """
        if self._closed:
            return 0
        pending = 0
        if not self.flush(timeout_ms=timeout_ms):
            pending = sum(s.unconfirmed for s in self._streams)
        for i in range(len(self._streams)):
            self.end_episode(i)
        for s in self._streams:
            s.writer.close()
        self._closed = True
        unconfirmed = min(pending * self._k, self._transitions_written)
        self._transitions_written -= unconfirmed
        self._unconfirmed_at_close = unconfirmed
        return unconfirmed + self._incomplete
