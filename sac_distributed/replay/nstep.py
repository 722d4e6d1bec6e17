"""n-step transitions, built by actors from consecutive one-step replay rows.

An n-step transition keeps the replay row format and the learner unchanged.
From the steps t .. t+m-1 of one episode (m = n, or fewer at an episode's
end) it stores, in the n-step fields of step t's row (`layout.RowLayout`
reads and replaces them),

    reward   = sum_k gamma^k (d_t ... d_{t+k-1}) r_{t+k}
    discount = gamma^(m-1) (d_t ... d_{t+m-1})
    next_observation = the observation after step t+m-1

so SacAgent's critic target `reward + gamma * discount * Q(next)` is the
n-step target `sum_k gamma^k r_{t+k} + gamma^m Q(s_{t+m})`, cut at terminal
steps (d = 0) and bootstrapped at time limits (d = 1). The rewards come from
the behaviour policy without off-policy correction, as in Acme's n-step
adders; small n (3 to 5) is the usual choice.
"""

from __future__ import annotations

import collections
from typing import Deque, List, Optional, Sequence, Tuple

import numpy as np

from sac_distributed.replay.layout import RowLayout


class NStepAccumulator:
    """Turns the one-step rows of ONE environment into n-step rows.

    `add` returns a row once n steps are pending; `end_episode` returns the
    shorter rows left when the episode ends (or is cut), so every step
    yields exactly one transition.
    """

    def __init__(self, layout: RowLayout, n_step: int, gamma: float):
        if n_step < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}.")
        self._n = n_step
        self._gamma = float(gamma)
        self._layout = layout
        self._pending: Deque[np.ndarray] = collections.deque()

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, row: np.ndarray) -> Optional[np.ndarray]:
        """Takes the next one-step row; returns an n-step row when one is complete."""
        self._pending.append(row)
        if len(self._pending) < self._n:
            return None
        combined = self._combine(self._pending)
        self._pending.popleft()
        return combined

    def end_episode(self) -> List[np.ndarray]:
        """The rows of the steps still pending, each over the steps left."""
        rows = []
        while self._pending:
            rows.append(self._combine(self._pending))
            self._pending.popleft()
        return rows

    def _combine(self, rows) -> np.ndarray:
        """The first row with the n-step reward, discount and next observation of `rows`."""
        layout = self._layout
        reward, discount = n_step_return(
            [layout.reward(row) for row in rows],
            [layout.discount(row) for row in rows],
            self._gamma,
        )
        return layout.with_n_step_fields(
            rows[0],
            reward=reward,
            discount=discount,
            next_observation=layout.next_observations(rows[-1]),
        )


def n_step_return(
    rewards: Sequence[float], discounts: Sequence[float], gamma: float
) -> Tuple[float, float]:
    """The (reward, discount) of m consecutive steps of one episode, as the module doc
    says: sum_k gamma^k (d_0 ... d_{k-1}) r_k, and gamma^(m-1) (d_0 ... d_{m-1})."""
    total = 0.0
    weight = 1.0  # gamma^k times the discounts before step k
    continuation = 1.0  # product of the discounts so far
    for reward, discount in zip(rewards, discounts):
        total += weight * float(reward)
        continuation *= float(discount)
        weight *= gamma * float(discount)
    return total, gamma ** (len(rewards) - 1) * continuation
