"""What one pixel transition costs a Reverb server's memory, by how items are laid out.

A frame-stacked pixel observation (84x84x3 uint8, stack 3: DrQ's setting) is
~62 KiB; how the replay stores it decides how many transitions a server holds.
Two layouts, written to a real server in another process through Reverb's
TrajectoryWriter, measured as the growth of that process's resident memory per
stored transition:

  pairs   one row per transition holding the whole stack s and the whole stack s'
          (what storing (s, s') per item means: 2 x stack frames per transition)
  frames  one row per env step holding one frame; an item is the stack + 1 frames
          it needs (s = the first `stack`, s' = the last `stack`) plus the action,
          reward and discount of its step, so consecutive items share frames and
          a frame is stored once (each episode adds `stack` rows of padding and
          the last frame)

  writer  `frames` as the product writes it: sac_distributed.replay.FrameWriter,
          the actor's pixel writer, fed stacked observations (what FrameStack gives);
          checked by tests/unit/test_frame_replay.py rather than here

Sampled items are checked against what was written (every frame of every item
sampled, by a transition id column), so a layout that stores less but returns the
wrong frames fails. Frames are uniform noise (`--frames=noise`: incompressible,
the worst case for Reverb's chunk compression) or a rendered MuJoCo episode
(`--frames=rendered`: HalfCheetah-v5 at 84x84 with MUJOCO_GL=egl, random actions;
rendering is slow on CPU-only machines, so a few hundred frames are rendered once
and cycled). JSON on stdout, and in --out when given:

    python benchmarks/probe.py pixel_replay_bytes --frames=noise --transitions=3000
    python benchmarks/probe.py pixel_replay_bytes --frames=rendered --transitions=3000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
import portpicker
import reverb

TABLE = "pixels"
ACTION_SIZE = 6  # HalfCheetah's
GIB = 1024**3
SERVER = """
import sys, time, reverb
table = reverb.Table(
    name=sys.argv[2], sampler=reverb.selectors.Uniform(), remover=reverb.selectors.Fifo(),
    max_size=10_000_000, rate_limiter=reverb.rate_limiters.MinSize(1))
server = reverb.Server(tables=[table], port=int(sys.argv[1]))
print("ready", flush=True)
server.wait()
"""


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _noise_frames(count: int, size: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (count, size, size, 3), dtype=np.uint8)


def _rendered_frames(count: int, size: int, seed: int) -> np.ndarray:
    os.environ.setdefault("MUJOCO_GL", "egl")
    import gymnasium

    env = gymnasium.make("HalfCheetah-v5", render_mode="rgb_array", width=size, height=size)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    frames = []
    for _ in range(count):
        frames.append(env.render())
        env.step(env.action_space.sample())
    env.close()
    return np.stack(frames).astype(np.uint8)


class Episodes:
    """Frame indices of a stream of episodes: the source frame each env step shows."""

    def __init__(self, num_frames: int, episode_length: int):
        self.num_frames, self.episode_length = num_frames, episode_length
        self._next = 0

    def episode(self) -> List[int]:
        """episode_length + 1 frame indices: the reset frame and one per step."""
        indices = [(self._next + i) % self.num_frames for i in range(self.episode_length + 1)]
        self._next = (self._next + self.episode_length + 1) % self.num_frames
        return indices


def _stack(frames: np.ndarray, indices: List[int]) -> np.ndarray:
    return np.concatenate([frames[i] for i in indices], axis=-1)  # channels stacked


def _padded_stacks(indices: List[int], stack: int) -> List[List[int]]:
    """The frame indices of each observation's stack; the first frame repeats at the start."""
    padded = [indices[0]] * (stack - 1) + indices
    return [padded[t : t + stack] for t in range(len(indices))]


def _write_pairs(writer, frames, episodes, stack, transitions) -> Dict[int, List[int]]:
    """One row (s, s', a, r, d) per transition. Returns transition id -> its stack+1 frames."""
    expected: Dict[int, List[int]] = {}
    rng = np.random.default_rng(0)
    while len(expected) < transitions:
        stacks = _padded_stacks(episodes.episode(), stack)
        for t in range(len(stacks) - 1):
            tid = len(expected)
            if tid == transitions:
                break
            writer.append(
                dict(
                    observation=_stack(frames, stacks[t]),
                    next_observation=_stack(frames, stacks[t + 1]),
                    action=rng.uniform(-1, 1, ACTION_SIZE).astype(np.float32),
                    reward=np.float32(rng.normal()),
                    discount=np.float32(1.0),
                    tid=np.int32(tid),
                )
            )
            writer.create_item(TABLE, 1.0, {k: c[-1] for k, c in writer.history.items()})
            expected[tid] = stacks[t] + stacks[t + 1][-1:]
        writer.end_episode()
    writer.flush()
    return expected


def _write_frames(writer, frames, episodes, stack, transitions, per_item=1):
    """One row per env step (its frame; its action, reward, discount once known); an item
    holds `per_item` consecutive transitions and references their stack + per_item frames.
    Returns transition id -> its stack + 1 frames."""
    expected: Dict[int, List[int]] = {}
    rng = np.random.default_rng(0)
    while len(expected) < transitions:
        indices = episodes.episode()
        for _ in range(stack - 1):  # padding rows: the reset frame, no action
            writer.append(dict(frame=frames[indices[0]]))
        padded = [indices[0]] * (stack - 1) + indices
        base = len(expected)  # the id of this episode's first transition
        for t in range(len(indices)):
            row = dict(frame=frames[indices[t]])
            if t < len(indices) - 1:  # the last frame has no action after it
                row.update(
                    action=rng.uniform(-1, 1, ACTION_SIZE).astype(np.float32),
                    reward=np.float32(rng.normal()),
                    discount=np.float32(1.0),
                    tid=np.int32(base + t),
                )
            writer.append(row)
            if t == 0 or t % per_item or len(expected) + per_item > transitions:
                continue  # an episode's last t % per_item transitions are not stored
            h = writer.history
            item = dict(frames=h["frame"][-(stack + per_item) :])
            item.update(
                {k: h[k][-(per_item + 1) : -1] for k in ("action", "reward", "discount", "tid")}
            )
            writer.create_item(TABLE, 1.0, item)
            for first in range(t - per_item, t):
                expected[base + first] = padded[first : first + stack + 1]
        writer.end_episode()
        if len(expected) + per_item > transitions:
            break
    writer.flush()
    return expected


def _write_product(client, frames, episodes, stack, transitions, per_item=1) -> int:
    """The actor's FrameWriter on stacked observations; returns transitions stored."""
    import tensorflow as tf

    from sac_distributed.replay.frames import FrameLayout, FrameWriter

    layout = FrameLayout(tuple(frames.shape[1:]), stack, (ACTION_SIZE,), tf.float32)
    writer = FrameWriter(client, layout, per_item, table=TABLE)
    rng = np.random.default_rng(0)
    while writer.transitions_written + per_item <= transitions:
        stacks = _padded_stacks(episodes.episode(), stack)
        for t in range(len(stacks) - 1):
            if writer.transitions_written + per_item > transitions:
                break
            writer.write_step(
                0,
                _stack(frames, stacks[t]),
                rng.uniform(-1, 1, ACTION_SIZE).astype(np.float32),
                float(rng.normal()),
                1.0,
                _stack(frames, stacks[t + 1]),
            )
        writer.end_episode(0)
    writer.flush()
    stored = writer.transitions_written
    writer.close()
    return stored


def _check_samples(client, frames, expected, layout, stack, count) -> int:
    """Samples `count` items; every frame must be the one written. Returns how many
    transitions were checked."""
    checked = 0
    keys = sorted(("observation", "next_observation") if layout == "pairs" else ("frames",)) + [
        "action",
        "discount",
        "reward",
        "tid",
    ]
    for sample in client.sample(TABLE, num_samples=count, emit_timesteps=False):
        # No table signature: the item's columns come back flat, in tf.nest's order
        # of the dict written (sorted keys).
        data = dict(zip(sorted(keys), sample.data))
        tids = np.atleast_1d(np.asarray(data["tid"]))
        for k, tid in enumerate(int(t) for t in tids):
            want = expected[tid]
            if layout == "pairs":
                ok = np.array_equal(
                    np.asarray(data["observation"]), _stack(frames, want[:stack])
                ) and np.array_equal(np.asarray(data["next_observation"]), _stack(frames, want[1:]))
            else:
                got = np.asarray(data["frames"])[k : k + stack + 1]
                ok = got.shape[0] == stack + 1 and all(
                    np.array_equal(got[j], frames[want[j]]) for j in range(stack + 1)
                )
            if not ok:
                raise AssertionError(f"{layout}: transition {tid} came back with other frames")
            checked += 1
    return checked


def measure(layout: str, frames: np.ndarray, args) -> Dict[str, float]:
    port = portpicker.pick_unused_port()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port), TABLE], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout.readline().strip() == "ready"
        client = reverb.Client(f"localhost:{port}")
        time.sleep(1.0)
        before = _rss_bytes(server.pid)
        episodes = Episodes(len(frames), args.episode_length)
        keep = 1 if layout == "pairs" else args.stack + args.per_item + 1
        start = time.perf_counter()
        if layout == "writer":
            stored = _write_product(
                client, frames, episodes, args.stack, args.transitions, args.per_item
            )
            return _measured(client, server, before, stored, frames, start, checked=0)
        with client.trajectory_writer(num_keep_alive_refs=keep) as writer:
            if args.max_chunk_length:
                column = ("observation",) if layout == "pairs" else ("frame",)
                length = args.max_chunk_length if layout == "frames" else 1
                writer.configure(column, num_keep_alive_refs=keep, max_chunk_length=length)
            if layout == "pairs":
                expected = _write_pairs(writer, frames, episodes, args.stack, args.transitions)
            else:
                expected = _write_frames(
                    writer, frames, episodes, args.stack, args.transitions, args.per_item
                )
        checked = _check_samples(client, frames, expected, layout, args.stack, args.check_samples)
        return _measured(client, server, before, len(expected), frames, start, checked)
    finally:
        server.terminate()
        server.wait(timeout=60)


def _measured(client, server, before: int, size: int, frames, start: float, checked: int):
    """The server's memory growth per stored transition, and the other figures."""
    write_s = time.perf_counter() - start
    time.sleep(1.0)
    grown = _rss_bytes(server.pid) - before
    items = client.server_info()[TABLE].current_size
    per = grown / size
    return dict(
        items=items,
        transitions=size,
        server_rss_growth_mib=grown / 2**20,
        bytes_per_transition=per,
        frames_per_transition=per / frames[0].nbytes,
        transitions_in_24_gib=int(24 * GIB / per),
        write_transitions_per_s=size / write_s,
        transitions_checked=checked,
    )


def parse(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", choices=("noise", "rendered"), default="noise")
    parser.add_argument("--size", type=int, default=84, help="frame height and width")
    parser.add_argument("--stack", type=int, default=3, help="frames per observation")
    parser.add_argument("--transitions", type=int, default=3000)
    parser.add_argument("--episode_length", type=int, default=250, help="policy steps")
    parser.add_argument("--source_frames", type=int, default=400, help="frames made, cycled")
    parser.add_argument(
        "--max_chunk_length",
        type=int,
        default=0,
        help="frames per chunk of the frame column (0: Reverb's auto-tuned length)",
    )
    parser.add_argument("--per_item", type=int, default=1, help="transitions per frames item")
    parser.add_argument("--check_samples", type=int, default=200)
    parser.add_argument("--layouts", default="pairs,frames,writer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="", help="also write the JSON here")
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse(argv)
    make = _noise_frames if args.frames == "noise" else _rendered_frames
    start = time.perf_counter()
    frames = make(args.source_frames, args.size, args.seed)
    made_s = time.perf_counter() - start
    result: Dict[str, object] = dict(
        frames=args.frames,
        frame_shape=list(frames.shape[1:]),
        frame_bytes=int(frames[0].nbytes),
        stack=args.stack,
        max_chunk_length=args.max_chunk_length,
        per_item=args.per_item,
        episode_length=args.episode_length,
        source_frames_per_s=args.source_frames / made_s,
    )
    layouts: Dict[str, Tuple[str, ...]] = {}
    for layout in args.layouts.split(","):
        layouts[layout] = measure(layout, frames, args)
    result["layouts"] = layouts
    if "pairs" in layouts and "frames" in layouts:
        result["pairs_over_frames"] = (
            layouts["pairs"]["bytes_per_transition"] / layouts["frames"]["bytes_per_transition"]
        )
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
