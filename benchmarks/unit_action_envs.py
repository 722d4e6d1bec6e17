"""A Gymnasium env with its actions rescaled to [-1, 1], as SB3's policies act (issue 73).

SB3's SAC squashes its Gaussian to [-1, 1] and rescales to the env's bounds outside
the policy: its critics see [-1, 1] actions and its log-probabilities (so its target
entropy -dim(A) and the entropy bonus in the critic's target) are measured there.
Ours squashes straight to the env's bounds. On an env whose bounds are not [-1, 1]
(Pusher-v5: [-2, 2]) the two parameterizations differ in all three places at once;
this factory gives ours SB3's, with no change to the library, for the ablation:

    sac-launch --env_name=benchmarks.unit_action_envs:make_env \\
        --env_kwargs='{"env_id": "Pusher-v5"}' ...   # from the repository root
"""

from __future__ import annotations

import gymnasium


def make_env(env_id: str = "Pusher-v5") -> gymnasium.Env:
    """`gymnasium.make(env_id)` acting on [-1, 1] (RescaleAction to the env's bounds)."""
    return gymnasium.wrappers.RescaleAction(gymnasium.make(env_id), -1.0, 1.0)
