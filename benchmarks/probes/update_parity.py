"""Is one SAC update of ours the same update as SB3's? Same weights, batches and noise.

Both TF-Agents loops (ours and the stock tutorial loop) trail SB3 early on
Walker2D and Ant under the same hyperparameters. This check takes the learning
out of the comparison: it starts our `SacAgent` (agent.make_agent, as the
learner builds it) from SB3's initial weights, feeds both the same random
batches and the same Gaussian noise for every action they sample, runs
`--steps` updates in each (SB3's own `SAC.train`, TF-Agents' own
`SacAgent._train`), and reports how far apart the weights and losses end up.

How far apart, as a share of how far the update moved them: for each network,
||ours - SB3|| / ||SB3 - SB3's start||, at each of `--marks`. Float rounding
alone gives ~1e-6 after one step. The one difference in the algorithms'
order: SB3 computes the temperature's loss from the actions it sampled before
the actor's step, TF-Agents samples them again after it, from the same noise
here; that reaches the critics and the actor only through alpha, a step later.

    python benchmarks/probe.py update_parity --env_name=Walker2DBulletEnv-v0 \\
        --flags="--clip_policy_log_std --adam_epsilon=1e-8 --squash_log_prob_epsilon=1e-6"

The SB3 half (probe.py update_parity_sb3) runs in `make bench-sb3`'s virtualenv.
"""

from __future__ import annotations

import sac_distributed  # noqa: F401  (selects tf-keras before TensorFlow is imported)

# isort: split

import argparse
import dataclasses
import json
import os
import shlex
import subprocess
import tempfile
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts
from tf_agents.utils import common

from benchmarks import learning
from sac_distributed import config as config_lib
from sac_distributed.algorithm.sac import learner as sac_learner
from sac_distributed.algorithm.sac import update as sac_update
from sac_distributed.envs import loader as env_loader

BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SB3_PYTHON = os.path.join(BENCHMARKS, ".venv-sb3", "bin", "python")
GROUPS = ("actor", "critic1", "critic2", "target1", "target2")
# The control run starts each weight this far (relatively) from SB3's start: about
# float32's rounding, so it shows how fast rounding-sized differences grow.
CONTROL_SCALE = 1e-6


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env_name", default="Walker2DBulletEnv-v0", help="its preset and sizes")
    p.add_argument("--flags", default="", help="hyperparameter flags for ours, e.g. --gamma=0.98")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--marks", default="1,10,100,200", help="steps at which to compare weights")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--done_rate", type=float, default=0.05, help="share of terminal transitions")
    p.add_argument("--sb3_python", default=DEFAULT_SB3_PYTHON)
    p.add_argument("--output", default=None, help="a JSON file for the report (unset: none)")
    args = p.parse_args(argv)
    args.marks = sorted({int(m) for m in args.marks.split(",")})
    if not args.marks or args.marks[0] < 1 or args.marks[-1] > args.steps:
        p.error(f"--marks must lie in 1..--steps ({args.steps}), got {args.marks}.")
    if not os.path.exists(args.sb3_python):
        p.error(f"{args.sb3_python} does not exist: build it with `make bench-sb3`.")
    return args


def hyperparams(env_name: str, flags: str) -> config_lib.Hyperparams:
    """The preset of `env_name` with `--name=value` flags applied, as learning.py
    applies a variant's; a flag that names no hyperparameter is refused."""
    given = shlex.split(flags)
    names = {f.name for f in dataclasses.fields(config_lib.Hyperparams)}
    unknown = [f for f in given if f.lstrip("-").partition("=")[0].removeprefix("no") not in names]
    if unknown:
        raise SystemExit(f"--flags: {' '.join(unknown)} set no hyperparameter.")
    return learning.resolved_hparams(env_name, given)


def check_unit_action_bounds(specs, env_name: str) -> None:
    """SB3 trains on actions rescaled to [-1, 1], ours on the env's own; their updates
    are the same computation only where the two coincide (every pybullet env)."""
    low, high = specs.action.minimum, specs.action.maximum
    if not (np.all(low == -1.0) and np.all(high == 1.0)):
        raise SystemExit(
            f"{env_name}'s actions lie in [{np.min(low)}, {np.max(high)}], and SB3 rescales "
            "them to [-1, 1] before its critics see them, so the two updates would differ "
            "by that scale. Use an env whose action bounds are [-1, 1] (any pybullet env)."
        )


def make_inputs(specs, hp, args) -> Dict[str, np.ndarray]:
    """Random batches, and the standard-normal noise of each action sample."""
    rng = np.random.default_rng(args.seed)
    obs_dim = int(np.prod(specs.observation.shape))
    action_dim = int(np.prod(specs.action.shape))
    shape = (args.steps, hp.batch_size)
    f32 = np.float32
    return {
        "observations": rng.normal(size=shape + (obs_dim,)).astype(f32),
        "next_observations": rng.normal(size=shape + (obs_dim,)).astype(f32),
        "actions": rng.uniform(-1, 1, size=shape + (action_dim,)).astype(f32),
        "rewards": rng.normal(size=shape).astype(f32),
        "dones": (rng.uniform(size=shape) < args.done_rate).astype(f32),
        "noise_observations": rng.normal(size=shape + (action_dim,)).astype(f32),
        "noise_next_observations": rng.normal(size=shape + (action_dim,)).astype(f32),
    }


def run_sb3(inputs, hp, args, work: str) -> Dict[str, np.ndarray]:
    path_in, path_out = os.path.join(work, "inputs.npz"), os.path.join(work, "sb3.npz")
    np.savez(
        path_in,
        hparams_json=json.dumps(dataclasses.asdict(hp)),
        seed=args.seed,
        marks=np.asarray(args.marks),
        **inputs,
    )
    # probe.py's update_parity_sb3 mode, under the SB3 virtualenv's Python
    script = [os.path.join(BENCHMARKS, "probe.py"), "update_parity_sb3"]
    subprocess.run(
        [args.sb3_python, *script, f"--inputs={path_in}", f"--output={path_out}"], check=True
    )
    return dict(np.load(path_out))


def _layers(weights: Dict[str, np.ndarray], prefix: str) -> List[np.ndarray]:
    out, i = [], 0
    while f"{prefix}/{i}/kernel" in weights:
        out += [weights[f"{prefix}/{i}/kernel"], weights[f"{prefix}/{i}/bias"]]
        i += 1
    return out


def _keras_actor(sb3: List[np.ndarray]) -> List[np.ndarray]:
    """SB3's hidden layers, then one projection: [mu | log_std] side by side."""
    hidden, (mu_k, mu_b, std_k, std_b) = sb3[:-4], sb3[-4:]
    return hidden + [np.concatenate([mu_k, std_k], 1), np.concatenate([mu_b, std_b])]


def networks(agent) -> Dict[str, List[tf.Variable]]:
    return {
        "actor": sac_learner.policy_variables(agent),
        "critic1": agent._critic_network_1.variables,  # noqa: SLF001
        "critic2": agent._critic_network_2.variables,  # noqa: SLF001
        "target1": agent._target_critic_network_1.variables,  # noqa: SLF001
        "target2": agent._target_critic_network_2.variables,  # noqa: SLF001
    }


def sb3_as_keras(weights: Dict[str, np.ndarray], prefix: str = "") -> Dict[str, list]:
    w = {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
    out = {name: _layers(w, name) for name in GROUPS}
    out["actor"] = _keras_actor(out["actor"])
    out["log_alpha"] = [w["log_alpha"]]
    return out


def load_start(agent, start: Dict[str, list]) -> None:
    for name, variables in networks(agent).items():
        values = start[name]
        shapes = ([tuple(v.shape) for v in variables], [v.shape for v in values])
        if shapes[0] != shapes[1]:
            raise SystemExit(f"{name}: ours has shapes {shapes[0]}, SB3's {shapes[1]}.")
        for var, value in zip(variables, values):
            var.assign(value)
    agent._log_alpha.assign(float(start["log_alpha"][0]))  # noqa: SLF001


class FixedNoise:
    """Replaces SacAgent's action sampling: u = mean + std * the given noise.

    Per update TF-Agents samples three times, in this order: at the next
    observations (critic loss), then twice at the observations (actor loss,
    temperature loss); the last two get SB3's one draw at the observations.
    """

    def __init__(self, agent, inputs):
        self._agent, self._inputs = agent, inputs
        self.step, self._calls = 0, 0

    def __call__(self, time_steps, training=False):
        name = ("noise_next_observations", "noise_observations")[min(self._calls % 3, 1)]
        self._calls += 1
        agent = self._agent
        policy = agent._train_policy if training else agent._policy  # noqa: SLF001
        dist = policy.distribution(time_steps, policy_state=()).action
        base = dist.input_distribution
        u = base.loc + base.stddev() * self._inputs[name][self.step]
        actions = dist._squashed_distribution.bijector.forward(u)  # noqa: SLF001
        return actions, common.log_probability(dist, actions, agent.action_spec)


def transition(inputs, k: int):
    obs, nxt = inputs["observations"][k], inputs["next_observations"][k]
    n = obs.shape[0]
    mid = tf.fill([n], ts.StepType.MID)
    first = ts.TimeStep(mid, tf.zeros([n]), tf.ones([n]), tf.constant(obs))
    done = inputs["dones"][k]
    step_type = tf.where(done > 0, ts.StepType.LAST, ts.StepType.MID)
    second = ts.TimeStep(
        step_type, tf.constant(inputs["rewards"][k]), tf.constant(1.0 - done), tf.constant(nxt)
    )
    action = policy_step.PolicyStep(tf.constant(inputs["actions"][k]), (), ())
    return trajectory.Transition(first, action, second)


def run_ours(specs, hp, inputs, start, marks) -> Dict[str, dict]:
    agent = sac_update.make_agent(specs, hp)
    load_start(agent, start)
    agent.initialize()  # targets = the critics just loaded
    noise = FixedNoise(agent, inputs)
    agent._actions_and_log_probs = noise  # noqa: SLF001
    steps = inputs["observations"].shape[0]
    losses = np.zeros((steps, 3))
    at_marks = {}
    for k in range(steps):
        noise.step = k
        info = agent._train(transition(inputs, k), weights=None)  # noqa: SLF001
        extra = info.extra
        losses[k] = [float(extra.critic_loss), float(extra.actor_loss), float(extra.alpha_loss)]
        if k + 1 in marks:
            current = {n: [v.numpy() for v in vs] for n, vs in networks(agent).items()}
            current["log_alpha"] = [agent._log_alpha.numpy()]  # noqa: SLF001
            at_marks[k + 1] = current
    return {"losses": losses, "marks": at_marks}


def _norm(values: List[np.ndarray]) -> float:
    return float(np.sqrt(sum(np.sum(np.square(v.astype(np.float64))) for v in values)))


def perturbed(start: Dict[str, list], scale: float, seed: int) -> Dict[str, list]:
    """`start` with every weight multiplied by 1 + scale * N(0, 1): the control run."""
    rng = np.random.default_rng(seed)
    return {
        name: [(v * (1.0 + scale * rng.standard_normal(v.shape))).astype(v.dtype) for v in values]
        for name, values in start.items()
    }


def divergence(start, reference: Dict[int, dict], other: Dict[int, dict]) -> Dict[int, dict]:
    """Per mark and network: ||other - reference|| / ||reference - start||."""
    report = {}
    for m, theirs in reference.items():
        row = {}
        for name in GROUPS + ("log_alpha",):
            moved = _norm([a - b for a, b in zip(theirs[name], start[name])])
            apart = _norm([a - b for a, b in zip(other[m][name], theirs[name])])
            row[name] = apart / moved if moved else None
        report[m] = row
    return report


def loss_differences(sb3_losses: np.ndarray, ours_losses: np.ndarray) -> dict:
    """Largest |ours - SB3| of each loss over all steps. Both halve the sum of the
    two critics' mean squared errors (SacAgent's critic_loss_weight is 0.5), so the
    losses compare as they are."""
    return {
        name: {
            "max_abs_difference": float(np.max(np.abs(ours_losses[:, i] - sb3_losses[:, i]))),
            "sb3_first": float(sb3_losses[0, i]),
            "sb3_last": float(sb3_losses[-1, i]),
        }
        for i, name in enumerate(("critic", "actor", "alpha"))
    }


def print_table(title: str, report: Dict[int, dict]) -> None:
    names = GROUPS + ("log_alpha",)
    print(title)
    print("| steps | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for m, row in report.items():
        cells = [f"{row[n]:.1e}" if row[n] is not None else "-" for n in names]
        print(f"| {m} | " + " | ".join(cells) + " |")


def print_losses(losses: dict) -> None:
    for name, values in losses.items():
        print(
            f"{name} loss: largest |ours - SB3| {values['max_abs_difference']:.2e} "
            f"(SB3: {values['sb3_first']:.4g} at step 1, {values['sb3_last']:.4g} at the last)"
        )


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    hp = hyperparams(args.env_name, args.flags)
    specs = env_loader.specs_for(args.env_name)
    check_unit_action_bounds(specs, args.env_name)
    inputs = make_inputs(specs, hp, args)
    with tempfile.TemporaryDirectory() as work:
        sb3 = run_sb3(inputs, hp, args, work)
    start = sb3_as_keras(sb3, "start/")
    reference = {m: sb3_as_keras(sb3, f"step{m}/") for m in args.marks}
    ours = run_ours(specs, hp, inputs, start, args.marks)
    control = run_ours(specs, hp, inputs, perturbed(start, CONTROL_SCALE, args.seed), args.marks)
    report = {
        "ours_vs_sb3": divergence(start, reference, ours["marks"]),
        "ours_vs_ours_perturbed": divergence(start, ours["marks"], control["marks"]),
        "losses": loss_differences(sb3["losses"], ours["losses"]),
    }
    print_table(
        "||ours - SB3|| / ||SB3 - start||, per network, after that many updates",
        report["ours_vs_sb3"],
    )
    print_table(
        f"Control: ours against ours started {CONTROL_SCALE:g} (relative) away, same measure",
        report["ours_vs_ours_perturbed"],
    )
    print_losses(report["losses"])
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            json.dump(
                {"env_name": args.env_name, "flags": args.flags, "steps": args.steps, **report},
                f,
                indent=1,
            )
    return 0
