"""A policy trained on [-1, 1] actions, acting in the env's own bounds (for exports).

With `Hyperparams.rescale_actions` every job acts on [-1, 1] and the env's step maps
an action to its bounds (envs/actions.py). A SavedModel is loaded beside the env as
the env is, so the exported policies map their actions the same way.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tf_agents.policies import tf_policy
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import policy_step

from sac_distributed.envs.actions import center_and_half_range


class EnvUnitsPolicy(tf_policy.TFPolicy):
    """`policy` (acting on [-1, 1]) with each action mapped to `env_action_spec`'s bounds:
    center + half range x action, as actions.UnitActions steps the env. Only actions
    are exported: its distribution is left out (PolicySaver skips what raises
    NotImplementedError)."""

    def __init__(self, policy: tf_policy.TFPolicy, env_action_spec: Any):
        spec = tensor_spec.from_spec(env_action_spec)
        super().__init__(
            policy.time_step_spec,
            spec,
            policy_state_spec=policy.policy_state_spec,
            info_spec=policy.info_spec,
            clip=False,
            name=f"{policy.name}_in_env_units",
        )
        self._policy = policy
        center, half_range = center_and_half_range(spec)
        self._center = tf.constant(center, spec.dtype)
        self._half_range = tf.constant(half_range, spec.dtype)

    def _variables(self):
        return self._policy.variables()

    def _action(self, time_step, policy_state, seed):
        step = self._policy.action(time_step, policy_state, seed=seed)
        action = self._center + self._half_range * tf.clip_by_value(step.action, -1.0, 1.0)
        return policy_step.PolicyStep(action, step.state, step.info)

    def _distribution(self, time_step, policy_state):
        raise NotImplementedError("EnvUnitsPolicy exports actions only.")
