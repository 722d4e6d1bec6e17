"""--target_entropy: the temperature's target reaches SacAgent; bad values are refused."""

import math

import pytest
from support.training import small_hparams

from sac_distributed.algorithm.sac import update as sac_update
from sac_distributed.errors import ConfigError


def test_unset_keeps_tf_agents_default_of_minus_half_the_action_dims(env_specs):
    agent = sac_update.make_agent(env_specs, small_hparams())
    action_dims = int(env_specs.action.shape.num_elements())
    assert agent._target_entropy == pytest.approx(-action_dims / 2.0)  # noqa: SLF001


def test_a_given_target_reaches_the_agent(env_specs):
    agent = sac_update.make_agent(env_specs, small_hparams(target_entropy=-1.0))
    assert agent._target_entropy == pytest.approx(-1.0)  # noqa: SLF001


@pytest.mark.parametrize("bad", [math.nan, math.inf, "high"])
def test_a_target_that_is_not_a_finite_number_is_refused(bad):
    with pytest.raises(ConfigError, match="target_entropy must be a finite number or unset"):
        small_hparams(target_entropy=bad)


def test_per_action_dim_sets_the_target_where_none_is_given(env_specs):
    agent = sac_update.make_agent(env_specs, small_hparams(target_entropy_per_action_dim=-1.0))
    action_dims = int(env_specs.action.shape.num_elements())
    assert agent._target_entropy == pytest.approx(-float(action_dims))  # noqa: SLF001
    both = small_hparams(target_entropy=-0.25, target_entropy_per_action_dim=-1.0)
    assert sac_update.make_agent(env_specs, both)._target_entropy == pytest.approx(-0.25)  # noqa: SLF001


@pytest.mark.parametrize("bad", [math.nan, -math.inf, "low"])
def test_a_per_action_dim_target_that_is_not_a_finite_number_is_refused(bad):
    with pytest.raises(ConfigError, match="target_entropy_per_action_dim must be a finite number"):
        small_hparams(target_entropy_per_action_dim=bad)
