"""A tanh-squashed Gaussian policy head whose log-probability caps the tanh term.

TF-Agents' `TanhNormalProjectionNetwork` corrects the Gaussian's log-density
for the tanh squash exactly: log|d tanh(u)/du| = log(1 - tanh(u)^2), which
falls without bound (about -2|u|) as an action saturates. SB3 computes
log(1 - tanh(u)^2 + eps) with eps = 1e-6, which stops at log(eps) (-13.8 per
action dimension), so a saturated action costs the entropy term at most that
much and its gradient there fades to zero. `projection_network(eps)` builds
TF-Agents' head with that capped term; sampling, the mode (greedy action) and
the network's weights are unchanged.
"""

from __future__ import annotations

import functools
from typing import Callable

import tensorflow as tf
import tensorflow_probability as tfp
from tf_agents.agents.sac import tanh_normal_projection_network
from tf_agents.distributions import tanh_bijector_stable
from tf_agents.distributions import utils as distribution_utils
from tf_agents.specs import distribution_spec


@functools.cache
def _capped_network_class(epsilon: float) -> type:
    """TF-Agents' head whose distribution's tanh log-det is log(1 - tanh(u)^2 + epsilon).

    Epsilon is fixed in the classes, not passed to their constructors, so that
    rebuilding an object from its constructor arguments (TFP's composite
    tensors, Network.copy) keeps it. One class per epsilon.
    """

    class CappedTanh(tanh_bijector_stable.Tanh):
        def _forward_log_det_jacobian(self, x):
            return tf.math.log(1.0 - tf.square(tf.tanh(x)) + epsilon)

    class CappedSquashToSpecNormal(distribution_utils.SquashToSpecNormal):
        def __init__(self, distribution, spec, validate_args=False, name="SquashToSpecNormal"):
            super().__init__(distribution, spec, validate_args=validate_args, name=name)
            affine = tfp.bijectors.Shift(self.action_means)(
                tfp.bijectors.Scale(self.action_magnitudes)
            )
            self._squashed_distribution = tfp.distributions.TransformedDistribution(
                distribution=distribution, bijector=tfp.bijectors.Chain([affine, CappedTanh()])
            )

    class CappedTanhNormalProjectionNetwork(
        tanh_normal_projection_network.TanhNormalProjectionNetwork
    ):
        """TF-Agents' head; only the distribution it builds differs."""

        def _output_distribution_spec(self, sample_spec, network_name):
            stock = super()._output_distribution_spec(sample_spec, network_name)

            def builder(*args, **kwargs):
                normal = tfp.distributions.MultivariateNormalDiag(*args, **kwargs)
                return CappedSquashToSpecNormal(normal, sample_spec)

            return distribution_spec.DistributionSpec(
                builder, stock.input_params_spec, sample_spec=sample_spec
            )

    return CappedTanhNormalProjectionNetwork


def projection_network(epsilon: float, std_transform: Callable = tf.exp) -> Callable:
    """A continuous_projection_net for ActorDistributionNetwork.

    epsilon 0 is TF-Agents' own head, untouched; above 0 the capped one.
    """
    network_class = (
        _capped_network_class(epsilon)
        if epsilon
        else tanh_normal_projection_network.TanhNormalProjectionNetwork
    )
    return functools.partial(network_class, std_transform=std_transform)
