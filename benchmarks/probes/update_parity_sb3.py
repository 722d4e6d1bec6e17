"""The SB3 half of probe.py update_parity: SB3 SAC's own `train()` on given batches and noise.

Runs in the SB3 virtualenv (`make bench-sb3`). Reads an .npz written by
probe.py update_parity (batches, the Gaussian noise of every action sample, the
hyperparameters as JSON), builds SB3 SAC with those hyperparameters as the
learning benchmark's SB3 peer maps them (peer_sb3.agent_kwargs), and calls
its `train(gradient_steps=1)` once per batch, with the replay's `sample` and
torch's Normal `rsample` replaced so that both see exactly the given data and
noise. Writes its starting weights, its weights at the marks and every step's
losses to another .npz.
"""

from __future__ import annotations

import argparse
import json
from typing import Dict, List, Optional

import numpy as np

from benchmarks.peer_sb3 import agent_kwargs


def _net_weights(prefix: str, modules) -> Dict[str, np.ndarray]:
    """`prefix/i/kernel` (in x out, Keras' layout) and `prefix/i/bias` of each Linear."""
    import torch

    linears = [m for m in modules if isinstance(m, torch.nn.Linear)]
    out = {}
    for i, layer in enumerate(linears):
        out[f"{prefix}/{i}/kernel"] = layer.weight.detach().numpy().T.copy()
        out[f"{prefix}/{i}/bias"] = layer.bias.detach().numpy().copy()
    return out


def weights(model) -> Dict[str, np.ndarray]:
    """Actor (hidden layers, then mu and log_std), both critics and both targets,
    and log alpha, named alike in both halves."""
    actor = model.actor
    out = _net_weights("actor", list(actor.latent_pi.modules()) + [actor.mu, actor.log_std])
    for name, critic in (("critic", model.critic), ("target", model.critic_target)):
        for i, q in enumerate(critic.q_networks):
            out.update(_net_weights(f"{name}{i + 1}", q.modules()))
    out["log_alpha"] = model.log_ent_coef.detach().numpy().reshape(()).copy()
    return out


def _dummy_env(obs_dim: int, action_dim: int):
    import gymnasium

    class Env(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        action_space = gymnasium.spaces.Box(-1.0, 1.0, (action_dim,), np.float32)

        def reset(self, *, seed=None, options=None):
            return np.zeros(obs_dim, np.float32), {}

        def step(self, action):
            return np.zeros(obs_dim, np.float32), 0.0, False, False, {}

    return Env()


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", required=True, help="the .npz probe.py update_parity wrote")
    p.add_argument("--output", required=True, help="the .npz to write")
    args = p.parse_args(argv)

    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.type_aliases import ReplayBufferSamples

    torch.set_num_threads(1)
    data = np.load(args.inputs)
    hp = json.loads(str(data["hparams_json"]))
    obs, act = data["observations"], data["actions"]
    steps, obs_dim, action_dim = obs.shape[0], obs.shape[-1], act.shape[-1]
    torch.manual_seed(int(data["seed"]))
    model = SAC(
        "MlpPolicy", _dummy_env(obs_dim, action_dim), device="cpu", **agent_kwargs(hp, action_dim)
    )
    model.set_logger(configure(None, []))
    start = weights(model)

    step = {"k": 0, "draw": 0}
    tensor = lambda name: torch.as_tensor(data[name][step["k"]])  # noqa: E731

    def sample(batch_size, env=None):
        return ReplayBufferSamples(
            tensor("observations"),
            tensor("actions"),
            tensor("next_observations"),
            tensor("dones")[:, None],
            tensor("rewards")[:, None],
        )

    def rsample(self, sample_shape=torch.Size()):
        # SB3 draws the actions at the observations first, then at the next ones.
        name = ("noise_observations", "noise_next_observations")[step["draw"] % 2]
        step["draw"] += 1
        return self.loc + self.scale * tensor(name)

    model.replay_buffer.sample = sample
    torch.distributions.Normal.rsample = rsample
    marks = [int(m) for m in data["marks"]]
    out = {f"start/{k}": v for k, v in start.items()}
    losses = np.zeros((steps, 3), np.float64)
    for k in range(steps):
        step["k"] = k
        model.train(gradient_steps=1, batch_size=model.batch_size)
        values = model.logger.name_to_value
        losses[k] = [
            values["train/critic_loss"],
            values["train/actor_loss"],
            values["train/ent_coef_loss"],
        ]
        if k + 1 in marks:
            out.update({f"step{k + 1}/{name}": v for name, v in weights(model).items()})
    out["losses"] = losses
    np.savez(args.output, **out)
    return 0
