"""What a GPU changes for the cost of one SAC and one CrossQ update, by critic width.

Our learner is TensorFlow 2.15, which cannot use the lent machine's CUDA 13 GPU
(benchmarks/device/README.md), so this times a stand-in written in PyTorch, which that
machine has: the same update shapes as our learner at HalfCheetah's sizes (17-dim
observations, 6-dim actions), batch 256, two critics of two hidden layers of WIDTH
units, an actor of 256x256.

- sac: critics on (s, a), target critics on (s', a'), Polyak update of the targets,
  the actor and the temperature every step.
- crossq: no target critics; (s, a) and (s', a') go through the batch-renormalized
  critics in one joint pass of 2 x batch rows; the actor (batch-renormalized too) every
  third critic step; Adam with beta1 = 0.5.

It prints one CSV row per (device, mode, algorithm, width): the median over --repeats rounds
of --steps updates each, after warm-up. Run it on any machine:

    python benchmarks/device/update_cost_torch.py --devices=cpu,cuda --graphs --out=costs.csv

Modes: eager (each op launched from Python, as SB3 runs), and with --graphs on cuda,
cuda_graph (three updates captured once and replayed: no Python or launch overhead).

The figures are the stand-in's, not our learner's; on the same 2-core machine both are
timed so that the two can be set side by side (benchmarks/device/README.md).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time

import torch
from torch import nn

OBS, ACT, BATCH = 17, 6, 256


class BatchRenorm(nn.Module):
    """Batch renormalization (Ioffe 2017) over features: batch statistics corrected
    towards the running ones by clipped r and d in training, running ones in inference."""

    def __init__(
        self,
        features: int,
        momentum: float = 0.01,
        r_max: float = 3.0,
        d_max: float = 5.0,
        eps: float = 1e-3,
    ):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("mean", torch.zeros(features))
        self.register_buffer("var", torch.ones(features))
        self.momentum, self.r_max, self.d_max, self.eps = momentum, r_max, d_max, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return (x - self.mean) / torch.sqrt(self.var + self.eps) * self.scale + self.bias
        mean = x.mean(0)
        var = x.var(0, unbiased=False)
        std = torch.sqrt(var + self.eps)
        running_std = torch.sqrt(self.var + self.eps)
        r = (std / running_std).clamp(1 / self.r_max, self.r_max).detach()
        d = ((mean - self.mean) / running_std).clamp(-self.d_max, self.d_max).detach()
        with torch.no_grad():
            self.mean += self.momentum * (mean.detach() - self.mean)
            self.var += self.momentum * (var.detach() - self.var)
        return ((x - mean) / std * r + d) * self.scale + self.bias


def mlp(inputs: int, width: int, outputs: int, renorm: bool) -> nn.Sequential:
    layers: list = [BatchRenorm(inputs)] if renorm else []
    size = inputs
    for _ in range(2):
        layers += [nn.Linear(size, width), nn.ReLU()]
        if renorm:
            layers.append(BatchRenorm(width))
        size = width
    layers.append(nn.Linear(size, outputs))
    return nn.Sequential(*layers)


class Update:
    """One algorithm's networks, optimizers and update step at one critic width."""

    def __init__(self, algorithm: str, width: int, device: str, capturable: bool = False):
        crossq = algorithm == "crossq"
        self.crossq = crossq
        self.critics = nn.ModuleList([mlp(OBS + ACT, width, 1, crossq) for _ in range(2)]).to(
            device
        )
        self.targets = (
            None
            if crossq
            else nn.ModuleList([mlp(OBS + ACT, width, 1, False) for _ in range(2)]).to(device)
        )
        if self.targets is not None:
            self.targets.load_state_dict(self.critics.state_dict())
        self.actor = mlp(OBS, 256, 2 * ACT, crossq).to(device)
        self.log_alpha = torch.zeros(1, device=device, requires_grad=True)
        betas = (0.5, 0.999) if crossq else (0.9, 0.999)
        lr = 1e-3 if crossq else 3e-4
        kw = {"lr": lr, "betas": betas, "capturable": capturable}
        self.critic_opt = torch.optim.Adam(self.critics.parameters(), **kw)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), **kw)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], **kw)
        self.steps = 0
        g = torch.Generator(device="cpu").manual_seed(0)
        self.batch = [
            t.to(device)
            for t in (
                torch.randn(BATCH, OBS, generator=g),
                torch.rand(BATCH, ACT, generator=g) * 2 - 1,
                torch.randn(BATCH, 1, generator=g),
                torch.randn(BATCH, OBS, generator=g),
            )
        ]

    def _policy(self, obs: torch.Tensor):
        mean, log_std = self.actor(obs).chunk(2, -1)
        std = log_std.clamp(-20, 2).exp()
        pre = mean + std * torch.randn_like(mean)
        action = torch.tanh(pre)
        log_prob = (-0.5 * ((pre - mean) / std) ** 2 - std.log() - 0.9189385).sum(-1, True)
        log_prob = log_prob - torch.log(1 - action.pow(2) + 1e-6).sum(-1, True)
        return action, log_prob

    def _q(self, nets, obs, act):
        x = torch.cat([obs, act], -1)
        return torch.min(nets[0](x), nets[1](x))

    def step(self) -> None:
        obs, act, rew, next_obs = self.batch
        alpha = self.log_alpha.exp().detach()
        with torch.no_grad():
            next_act, next_logp = self._policy(next_obs)
        if self.crossq:  # (s, a) and (s', a') in one pass: both share batch statistics
            joint = torch.cat([torch.cat([obs, act], -1), torch.cat([next_obs, next_act], -1)])
            q = [net(joint) for net in self.critics]
            q_now = [qi[:BATCH] for qi in q]
            q_next = torch.min(q[0][BATCH:], q[1][BATCH:]).detach()
        else:
            q_now = [net(torch.cat([obs, act], -1)) for net in self.critics]
            with torch.no_grad():
                q_next = self._q(self.targets, next_obs, next_act)
        target = rew + 0.99 * (q_next - alpha * next_logp)
        critic_loss = sum(((qi - target) ** 2).mean() for qi in q_now)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        self.steps += 1
        if not self.crossq or self.steps % 3 == 0:
            if self.crossq:  # the actor's loss reads the critics' running statistics
                self.critics.eval()
            new_act, logp = self._policy(obs)
            actor_loss = (alpha * logp - self._q(self.critics, obs, new_act)).mean()
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.actor_opt.step()
            self.critics.train()
            alpha_loss = -(self.log_alpha * (logp.detach() - ACT)).mean()
            self.alpha_opt.zero_grad(set_to_none=True)
            alpha_loss.backward()
            self.alpha_opt.step()
        if self.targets is not None:
            with torch.no_grad():
                for t, s in zip(self.targets.parameters(), self.critics.parameters()):
                    t.lerp_(s, 0.005)


def time_updates(update: Update, device: str, steps: int, repeats: int) -> float:
    """Median milliseconds per update over `repeats` rounds of `steps` updates."""
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for _ in range(max(10, steps // 5)):
        update.step()
    sync()
    rounds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            update.step()
        sync()
        rounds.append((time.perf_counter() - start) * 1000 / steps)
    return statistics.median(rounds)


def time_graphed(update: Update, steps: int, repeats: int) -> float:
    """As time_updates, with three updates captured in one CUDA graph and replayed: the
    cost without Python and kernel-launch overhead (a compiled learner's floor)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(6):  # warm-up off the capture, ending at a multiple of 3
            update.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(3):  # CrossQ's actor runs on the third
            update.step()
    replays = max(1, steps // 3)
    for _ in range(max(3, replays // 5)):
        graph.replay()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - start) * 1000 / (3 * replays))
    return statistics.median(rounds)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", default="cpu", help="comma-separated: cpu, cuda")
    p.add_argument("--widths", default="256,512,1024,2048")
    p.add_argument("--algorithms", default="sac,crossq")
    p.add_argument("--steps", type=int, default=50, help="updates per timed round")
    p.add_argument("--cpu_steps", type=int, default=0, help="on cpu (0: --steps)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's)")
    p.add_argument("--graphs", action="store_true", help="on cuda, also time CUDA-graph replay")
    p.add_argument("--out", default="", help="CSV path (also printed)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for device in args.devices.split(","):
        if device == "cuda" and not torch.cuda.is_available():
            print("cuda: not available, skipped", file=sys.stderr)
            continue
        name = (
            torch.cuda.get_device_name(0)
            if device == "cuda"
            else (f"cpu ({torch.get_num_threads()} threads)")
        )
        steps = (args.cpu_steps or args.steps) if device == "cpu" else args.steps
        for width in [int(w) for w in args.widths.split(",")]:
            for algorithm in args.algorithms.split(","):
                modes = ["eager", "cuda_graph"] if device == "cuda" and args.graphs else ["eager"]
                for mode in modes:
                    torch.manual_seed(0)
                    try:
                        if mode == "eager":
                            update = Update(algorithm, width, device)
                            ms = time_updates(update, device, steps, args.repeats)
                        else:
                            update = Update(algorithm, width, device, capturable=True)
                            ms = time_graphed(update, steps, args.repeats)
                    except Exception as error:  # a failed mode leaves the others' rows
                        print(
                            f"{name},{algorithm},{width},{mode}: failed: {error!r}",
                            file=sys.stderr,
                            flush=True,
                        )
                        continue
                    row = {
                        "device": name,
                        "mode": mode,
                        "algorithm": algorithm,
                        "critic_width": width,
                        "ms_per_update": round(ms, 3),
                        "updates_per_s": round(1000 / ms, 1),
                        "torch": torch.__version__,
                    }
                    rows.append(row)
                    print(",".join(str(v) for v in row.values()), flush=True)
    if args.out and rows:
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
