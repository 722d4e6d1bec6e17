"""--learning_rate_schedule: linear decay of every learning rate to 0 at num_iterations."""

import pytest
import tensorflow as tf
from support.training import small_hparams

from sac_distributed.algorithm.sac import update as sac_update
from sac_distributed.errors import ConfigError


def _optimizers(agent):
    return {
        "actor": agent._actor_optimizer,  # noqa: SLF001
        "critic": agent._critic_optimizer,  # noqa: SLF001
        "alpha": agent._alpha_optimizer,  # noqa: SLF001
    }


def _rate(optimizer, step=None) -> float:
    """The learning rate an update at `step` (default: the optimizer's next) uses."""
    rate = optimizer.learning_rate
    if isinstance(rate, tf.keras.optimizers.schedules.LearningRateSchedule):
        return float(rate(optimizer.iterations if step is None else step))
    return float(rate)


def _check_decayed_over(agent, hparams, steps: int) -> None:
    """Each optimizer took `steps` updates, the last at 1/steps of its starting rate."""
    for name, optimizer in _optimizers(agent).items():
        start = getattr(hparams, f"{name}_learning_rate")
        assert int(optimizer.iterations) == steps, name
        assert _rate(optimizer, steps - 1) == pytest.approx(start / steps, rel=1e-4), name


def test_linear_schedule_halves_each_rate_midway_and_ends_at_zero(env_specs):
    hp = small_hparams(
        learning_rate_schedule="linear",
        num_iterations=100,
        actor_learning_rate=3e-4,
        critic_learning_rate=1e-3,
        alpha_learning_rate=2e-4,
    )
    agent = sac_update.make_agent(env_specs, hp)
    for name, optimizer in _optimizers(agent).items():
        start = getattr(hp, f"{name}_learning_rate")
        assert _rate(optimizer) == pytest.approx(start), name  # before any step
        assert _rate(optimizer, 50) == pytest.approx(start / 2), name
        assert _rate(optimizer, 100) == pytest.approx(0.0, abs=1e-12), name
        assert _rate(optimizer, 150) == pytest.approx(0.0, abs=1e-12), name  # stays at 0


def test_constant_is_the_default_and_keeps_each_rate(env_specs):
    hp = small_hparams()
    assert hp.learning_rate_schedule == "constant"
    agent = sac_update.make_agent(env_specs, hp)
    for name, optimizer in _optimizers(agent).items():
        assert float(optimizer.learning_rate) == pytest.approx(getattr(hp, f"{name}_learning_rate"))


def test_the_real_learner_steps_the_schedule_once_per_train_step(
    make_learner_config, make_learner, fill_replay
):
    fill_replay(128)
    # No scheduled export (run() still writes its final one): nothing here reads it.
    config = make_learner_config(
        hparams_overrides=dict(
            learning_rate_schedule="linear", num_iterations=20, policy_save_interval=1_000
        )
    )
    loop = make_learner(config)
    result = loop.run()
    assert result.stop_reason == "num_iterations reached" and loop.step == 20
    _check_decayed_over(loop.learner.agent, config.hparams, steps=20)
    for optimizer in _optimizers(loop.learner.agent).values():
        assert _rate(optimizer) == pytest.approx(0.0, abs=1e-12)  # a further update: 0


@pytest.mark.parametrize("bad", ["cosine", "", 1])
def test_an_unknown_schedule_is_refused_with_the_choices(bad):
    with pytest.raises(ConfigError, match="learning_rate_schedule must be one of constant, linear"):
        small_hparams(learning_rate_schedule=bad)


def test_a_restarted_learner_resumes_the_schedule_where_it_stopped(
    make_learner_config, make_learner, fill_replay
):
    # The schedule reads each optimizer's step count, which the checkpoint keeps:
    # a learner restarted at step 20 of 40 goes on at half the rate, not the full one.
    fill_replay(128)
    # No scheduled exports (run() still writes its final one): nothing here reads them.
    config = make_learner_config(
        hparams_overrides=dict(
            learning_rate_schedule="linear", num_iterations=40, policy_save_interval=1_000
        )
    )
    first = make_learner(config)
    assert first.start()
    first.train(20)  # checkpoint_interval is 10: step 20 is saved
    assert first.step == 20
    second = make_learner(config)
    assert second.step == 20
    result = second.run()
    assert result.stop_reason == "num_iterations reached" and second.step == 40
    _check_decayed_over(second.learner.agent, config.hparams, steps=40)
