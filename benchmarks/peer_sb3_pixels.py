"""The pixel peer (issue 71): Stable-Baselines3 SAC with `CnnPolicy` on a DeepMind
Control task from pixels, with our encoder's size and our DMC run's hyperparameters.

What a user gets from SB3 on the same env: `examples/dmc_pixels.py` (84x84 RGB, the
action repeat inside the env), the last 3 frames along the channels (the oldest first,
the first frame repeated at a reset, as ours), and SB3's SAC on it. The encoder is
DrQ's and ours (conv 32 3x3 stride 2, three conv 32 3x3 stride 1, Linear to 50,
LayerNorm, tanh; pixels / 255), given to SB3 as its features extractor; the MLPs,
learning rate, batch, buffer, warm-up, tau, target-update period, initial temperature
and target entropy are those of `benchmarks/results/dmc_pixels/cheetah_run_seed*/`.

What stays SB3's, since it is what SB3 does: no image augmentation, and the actor and
the critics each with an encoder of its own, each trained by its own loss
(`share_features_extractor=False`, SB3's SAC default), where ours shares one encoder
that the critic loss alone trains. So this is SAC from pixels as SB3 ships it.

    make bench-sb3 && benchmarks/.venv-sb3/bin/pip install dm-control==1.0.52
    MUJOCO_GL=egl benchmarks/.venv-sb3/bin/python benchmarks/peer_sb3_pixels.py \\
        --domain=cheetah --task=run --action_repeat=4 --seed=0 --steps=25000 \\
        --results=benchmarks/results/dmc_pixels/sb3_cheetah_run_seed0/results.csv

--steps and --eval_every count policy steps (x the action repeat for frames), and the
results file is the evaluator's format, so `python -m benchmarks.report.dmc_pixels`
draws it beside our seeds. SAC_BENCH_TORCH_THREADS sets torch's threads (default: all
cores, for the convs).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from typing import List, Optional

import numpy as np

if __package__ in (None, ""):  # run as a file: the repo root, so that `benchmarks` imports
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchmarks.peer_common import ResultsWriter  # noqa: E402
from benchmarks.peer_sb3 import evaluate, torch_threads  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Ours: sac_distributed.algorithm.pixel_policy's constants.
CONV_FILTERS, CONV_KERNEL, CONV_STRIDES, FEATURES, LAYER_NORM_EPSILON = (
    32,
    3,
    (2, 1, 1, 1),
    50,
    1e-3,
)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--domain", default="cheetah")
    p.add_argument("--task", default="run")
    p.add_argument("--action_repeat", type=int, default=4)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--steps", type=int, default=25_000, help="policy steps, warm-up included")
    p.add_argument("--eval_every", type=int, default=2_500, help="policy steps between evaluations")
    p.add_argument("--num_eval_episodes", type=int, default=10)
    p.add_argument("--results", required=True, help="results.csv to append rows to")
    p.add_argument("--frame_stack", type=int, default=3)
    p.add_argument("--learning_starts", type=int, default=1_000)
    p.add_argument("--buffer_size", type=int, default=100_000)
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--learning_rate", type=float, default=2e-4)
    p.add_argument("--tau", type=float, default=0.01)
    p.add_argument("--target_update_interval", type=int, default=2)
    p.add_argument("--initial_alpha", type=float, default=0.1)
    p.add_argument("--hidden", type=int, default=1024, help="units of each of the 2 MLP layers")
    args = p.parse_args(argv)
    if args.steps <= args.learning_starts:
        p.error(f"--steps ({args.steps}) must exceed --learning_starts ({args.learning_starts}).")
    if args.frame_stack < 1 or args.action_repeat < 1:
        p.error("--frame_stack and --action_repeat must be >= 1.")
    return args


def make_env(args: argparse.Namespace, seed: int):
    """examples/dmc_pixels.py's env with the last --frame_stack frames along the channels."""
    import gymnasium

    sys.path.insert(0, os.path.join(REPO, "examples"))
    from dmc_pixels import DmcPixels

    class ChannelStack(gymnasium.Wrapper):
        def __init__(self, env: gymnasium.Env, frames: int):
            super().__init__(env)
            h, w, c = env.observation_space.shape
            self.observation_space = gymnasium.spaces.Box(0, 255, (h, w, c * frames), np.uint8)
            self._frames: collections.deque = collections.deque(maxlen=frames)

        def reset(self, **kwargs):
            frame, info = self.env.reset(**kwargs)
            self._frames.extend([frame] * self._frames.maxlen)
            return np.concatenate(self._frames, axis=-1), info

        def step(self, action):
            frame, reward, terminated, truncated, info = self.env.step(action)
            self._frames.append(frame)
            return np.concatenate(self._frames, axis=-1), reward, terminated, truncated, info

    env = ChannelStack(
        DmcPixels(args.domain, args.task, action_repeat=args.action_repeat), args.frame_stack
    )
    env.reset(seed=seed)
    env.action_space.seed(seed)
    return env


def encoder_class():
    """DrQ's encoder as an SB3 features extractor (built lazily: torch is imported late)."""
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from torch import nn

    class DrQEncoder(BaseFeaturesExtractor):
        def __init__(self, observation_space, features_dim: int = FEATURES):
            super().__init__(observation_space, features_dim)
            layers, channels = [], observation_space.shape[0]  # SB3 hands images channels-first
            for stride in CONV_STRIDES:
                layers += [nn.Conv2d(channels, CONV_FILTERS, CONV_KERNEL, stride), nn.ReLU()]
                channels = CONV_FILTERS
            self.convs = nn.Sequential(*layers, nn.Flatten())
            with torch.no_grad():
                flat = self.convs(torch.zeros(1, *observation_space.shape)).shape[1]
            self.head = nn.Sequential(
                nn.Linear(flat, features_dim),
                nn.LayerNorm(features_dim, eps=LAYER_NORM_EPSILON),
                nn.Tanh(),
            )

        def forward(self, observations):  # SB3 has already divided the pixels by 255
            return self.head(self.convs(observations))

    return DrQEncoder


def model_kwargs(args: argparse.Namespace, action_dim: int) -> dict:
    """SAC(...)'s arguments: our DMC run's values (see the module docstring)."""
    return dict(
        buffer_size=min(args.buffer_size, args.steps),
        learning_starts=args.learning_starts,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        tau=args.tau,
        gamma=0.99,
        train_freq=1,
        gradient_steps=1,
        target_update_interval=args.target_update_interval,
        ent_coef=f"auto_{args.initial_alpha}",
        target_entropy=-float(action_dim),  # ours for an env without a preset: -dim(A)
        policy_kwargs=dict(
            features_extractor_class=encoder_class(),
            net_arch=[args.hidden, args.hidden],
        ),
    )


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(
        torch_threads(os.environ.get("SAC_BENCH_TORCH_THREADS", str(os.cpu_count() or 1)))
    )
    env, eval_env = make_env(args, args.seed), make_env(args, args.seed + 10_000)
    action_dim = int(np.prod(env.action_space.shape))
    model = SAC(
        "CnnPolicy", env, seed=args.seed, device="cpu", verbose=0, **model_kwargs(args, action_dim)
    )
    writer = ResultsWriter(args.results)

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            steps = self.num_timesteps
            if (
                steps >= args.learning_starts
                and (steps - args.learning_starts) % args.eval_every == 0
            ):
                returns, lengths = evaluate(self.model, eval_env, args.num_eval_episodes)
                writer.add(self.model._n_updates, steps, returns, lengths)  # noqa: SLF001
            return True

    os.makedirs(os.path.dirname(os.path.abspath(args.results)), exist_ok=True)
    model.learn(total_timesteps=args.steps, callback=Evaluate())
    if (args.steps - args.learning_starts) % args.eval_every:
        returns, lengths = evaluate(model, eval_env, args.num_eval_episodes)
        writer.add(model._n_updates, args.steps, returns, lengths)  # noqa: SLF001
    return 0


if __name__ == "__main__":
    sys.exit(main())
