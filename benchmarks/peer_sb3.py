"""Peer (b) of the learning benchmark: Stable-Baselines3 SAC with our hyperparameters
(or, with --own_defaults, with SB3's own: what a user who writes `SAC("MlpPolicy", env)` gets).

Runs in its own virtualenv (`make bench-sb3` builds benchmarks/.venv-sb3):
torch requires typing_extensions >= 4.8 and tf-agents 0.19 pins 4.5.0, so the
two cannot share one environment. Gymnasium ids (MuJoCo v5) are made by
Gymnasium itself, the very env ours trains. The gym 0.23 / pybullet env is adapted to
the gymnasium API that SB3 2.x speaks, keeping gym's time-limit flag as
`truncated` so that SB3 bootstraps through time limits like we do.

Mapped from our Hyperparams: learning rate (SB3 has one for actor, critics
and temperature; ours must agree), buffer size, learning_starts =
initial_collect_steps, batch size, tau, gamma, target update interval, network
sizes (ReLU MLPs), gradient steps per env step (--utd), and the target entropy
(unset: TF-Agents' default, -dim(A)/2), with the temperature starting at 1.
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import numpy as np

if __package__ in (None, ""):  # run as a file: the repo root, so that `benchmarks` imports
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchmarks.peer_common import ResultsWriter, episode_log, hparam, parse_args  # noqa: E402


def make_env(env_name: str, seed: int):
    """The env as SB3 gets it: Gymnasium's own for a Gymnasium id (MuJoCo v5; the
    `gymnasium:` prefix picks it for an id both register), else a gymnasium.Env
    around `gym.make(env_name)` (gym 0.23, pybullet registered), as ours loads them."""
    import gym
    import gymnasium

    gymnasium_id = env_name.split("gymnasium:", 1)[-1]
    if env_name.startswith("gymnasium:") or (
        gymnasium_id in gymnasium.envs.registry and gymnasium_id not in gym.envs.registry.env_specs
    ):
        env = gymnasium.make(gymnasium_id)
        env.reset(seed=seed)
        env.action_space.seed(seed)
        return env
    if "Bullet" in env_name:
        import pybullet_envs  # noqa: F401  (registers the pybullet ids with gym)

    class GymToGymnasium(gymnasium.Env):
        def __init__(self) -> None:
            self.env = gym.make(env_name)
            self.env.seed(seed)
            self.env.action_space.seed(seed)
            self.observation_space = _box(gymnasium, self.env.observation_space)
            self.action_space = _box(gymnasium, self.env.action_space)

        def reset(self, *, seed=None, options=None):
            if seed is not None:
                self.env.seed(seed)
            return np.asarray(self.env.reset(), np.float32), {}

        def step(self, action):
            obs, reward, done, info = self.env.step(action)
            truncated = bool(info.get("TimeLimit.truncated", False))
            return (
                np.asarray(obs, np.float32),
                float(reward),
                done and not truncated,
                truncated,
                info,
            )

    return GymToGymnasium()


def _box(gymnasium, space):
    return gymnasium.spaces.Box(
        low=space.low.astype(np.float32), high=space.high.astype(np.float32), dtype=np.float32
    )


def _target_entropy(hp: dict, action_dim: int) -> float:
    """Ours (Hyperparams.target_entropy_for): hparams' target_entropy, or
    target_entropy_per_action_dim x dim(A) when unset (TF-Agents' -0.5 where runs
    from before that field recorded none)."""
    value = hp.get("target_entropy")
    if value is not None:
        return float(value)
    return float(hp.get("target_entropy_per_action_dim", -0.5)) * action_dim


# Our hyperparameters SB3's SAC has no counterpart for, with the value it always
# trains with: its critics are plain MLPs on the squared TD error.
SB3_UNSUPPORTED = {"critic_loss": "squared", "critic_layer_norm": False}
# Of the hyperparameters the other peers leave out, those SB3's SAC follows: n-step
# returns (SB3 >= 2.6: `n_steps`, its NStepReplayBuffer; an episode's end, terminated
# or truncated, cuts the sum short as ours does, and only termination stops the bootstrap).
SB3_FOLLOWS = ("n_step",)


def agent_kwargs(hp: dict, action_dim: int) -> dict:
    """SB3 SAC's arguments that shape its updates, from our hparams: the learning
    rate (one for all three; ours must agree), batch size, tau, gamma, target
    update interval, temperature (learned, from 1) and its target, network sizes,
    n-step returns."""
    for name, plain in SB3_UNSUPPORTED.items():
        if hp.get(name, plain) != plain:
            raise SystemExit(f"SB3 SAC cannot train with {name}={hp[name]}; use {plain}.")
    lrs = {hparam(hp, k) for k in ("actor_learning_rate", "critic_learning_rate")}
    if len(lrs) != 1:
        raise SystemExit(f"SB3 SAC has one learning rate; these hparams have {sorted(lrs)}.")
    return dict(
        learning_rate=lrs.pop(),
        batch_size=hparam(hp, "batch_size"),
        tau=hparam(hp, "target_update_tau"),
        gamma=hparam(hp, "gamma"),
        target_update_interval=hparam(hp, "target_update_period"),
        ent_coef="auto_1.0",
        target_entropy=_target_entropy(hp, action_dim),
        n_steps=hparam(hp, "n_step"),
        policy_kwargs=dict(
            net_arch=dict(
                pi=list(hparam(hp, "actor_fc_layer_params")),
                qf=list(hparam(hp, "critic_joint_fc_layer_params")),
            )
        ),
    )


def evaluate(model, env, episodes: int) -> tuple:
    """Greedy returns and lengths of `episodes` full episodes."""
    returns: List[float] = []
    lengths: List[float] = []
    for _ in range(episodes):
        obs, _ = env.reset()
        total, length, done = 0.0, 0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += reward
            length += 1
            done = terminated or truncated
        returns.append(total)
        lengths.append(length)
    return returns, lengths


def torch_threads(value: str) -> int:
    """The torch intra-op thread count from SAC_BENCH_TORCH_THREADS's text."""
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise SystemExit(f"SAC_BENCH_TORCH_THREADS must be a whole number >= 1, got {value!r}.")
    return threads


def _add_own(p) -> None:
    p.add_argument(
        "--own_defaults",
        action="store_true",
        help="SB3's own SAC defaults (learning_starts 100, lr 3e-4, batch 256, 256x256 nets, "
        "target entropy -dim(A), ...) instead of --hparams_json; only the seed and the "
        "update ratio (--utd) are ours",
    )


def sb3_model_kwargs(hp: dict, action_dim: int, own_defaults: bool, utd: float) -> dict:
    """SAC(...)'s keyword arguments: ours mapped (agent_kwargs), or SB3's own defaults."""
    steps = dict(train_freq=1, gradient_steps=max(1, int(round(utd))))
    if own_defaults:
        return steps
    return dict(
        buffer_size=hparam(hp, "replay_buffer_capacity"),
        learning_starts=hparam(hp, "initial_collect_steps"),
        **steps,
        **agent_kwargs(hp, action_dim),
    )


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv, __doc__.split("\n\n")[0], add_own=_add_own)
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    # One intra-op thread by default: for small MLPs torch's thread pool only adds
    # synchronisation, and beside other busy processes on 2 cores it spins (measured:
    # 84 SGD steps/s with 1 thread, 2.8 with 2, InvertedPendulum 64x64, loaded machine).
    # SAC_BENCH_TORCH_THREADS gives SB3 more when it has the machine to itself.
    torch.set_num_threads(torch_threads(os.environ.get("SAC_BENCH_TORCH_THREADS", "1")))
    hp = args.hparams
    env, eval_env = make_env(args.env_name, args.seed), make_env(args.env_name, args.seed + 10_000)
    action_dim = int(np.prod(env.action_space.shape))
    model = SAC(
        "MlpPolicy",
        env,
        seed=args.seed,
        device="cpu",
        verbose=0,
        **sb3_model_kwargs(hp, action_dim, args.own_defaults, args.utd),
    )
    writer = ResultsWriter(args.results)
    episodes = episode_log(args)
    # Evaluations every --eval_every env steps after the warm-up learning.py planned
    # (with SB3's own defaults: from the start, its learning_starts being 100).
    start = 0 if args.own_defaults else hparam(hp, "initial_collect_steps")

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            steps = self.num_timesteps
            for info in self.locals.get("infos", ()):  # SB3's Monitor marks an episode's end
                if episodes is not None and "episode" in info:
                    episodes.append(steps, float(info["episode"]["r"]), int(info["episode"]["l"]))
            if steps >= start and (steps - start) % args.eval_every == 0:
                returns, lengths = evaluate(self.model, eval_env, args.num_eval_episodes)
                writer.add(self.model._n_updates, steps, returns, lengths)  # noqa: SLF001
            return True

    model.learn(total_timesteps=args.env_steps, callback=Evaluate())
    if (args.env_steps - start) % args.eval_every:
        returns, lengths = evaluate(model, eval_env, args.num_eval_episodes)
        writer.add(model._n_updates, args.env_steps, returns, lengths)  # noqa: SLF001
    return 0


if __name__ == "__main__":
    sys.exit(main())
