"""Typed configuration: SAC hyperparameters, per-environment presets, job configs.

Every job (server, actor, learner, evaluator) gets one frozen dataclass that is
validated when it is built, so a bad flag fails before any process connects to
anything. All jobs share `Hyperparams`: the environment name and the network
sizes in it determine the Reverb table signatures, so building every job from
the same flags and presets guarantees that the signatures agree.

The package's modules, each one concept: `checks` (the validators),
`hyperparams` (`Hyperparams`), `presets` (per-env presets, `hyperparams_for`),
`jobs` (one config per job) and `launch` (`LaunchConfig`, a whole run). Import
the names from `sac_distributed.config`.
"""

from sac_distributed.config.checks import (
    MAX_SEED,
    parse_env_kwargs,
    validate_address,
    validate_rate_limit,
)
from sac_distributed.config.hyperparams import (
    CRITIC_LOSSES,
    DEFAULT_ENV_NAME,
    LEARNING_RATE_SCHEDULES,
    MAX_N_STEP,
    NETWORK_INITS,
    POLICY_LOG_STD_RANGE,
    Hyperparams,
    default_error_buffer,
)
from sac_distributed.config.jobs import (
    DEFAULT_PORT,
    STRATEGIES,
    ActorConfig,
    ClientConfig,
    EvaluatorConfig,
    LearnerConfig,
    ServerConfig,
)
from sac_distributed.config.launch import ENGINES, LaunchConfig
from sac_distributed.config.presets import (
    GENERIC_MAX_INTERVAL,
    GENERIC_PRESET,
    GENERIC_VARIABLE_UPDATE_INTERVAL,
    GENERIC_WARM_UP,
    PRESETS,
    describe_generic_defaults,
    generic_defaults,
    hyperparams_for,
    untuned_warnings,
    variable_update_interval_for,
)
from sac_distributed.errors import ConfigError  # raised by every check; importable here too

__all__ = [
    "ConfigError",
    "CRITIC_LOSSES",
    "DEFAULT_ENV_NAME",
    "DEFAULT_PORT",
    "ENGINES",
    "GENERIC_MAX_INTERVAL",
    "GENERIC_PRESET",
    "GENERIC_VARIABLE_UPDATE_INTERVAL",
    "GENERIC_WARM_UP",
    "LEARNING_RATE_SCHEDULES",
    "MAX_N_STEP",
    "MAX_SEED",
    "NETWORK_INITS",
    "POLICY_LOG_STD_RANGE",
    "PRESETS",
    "STRATEGIES",
    "ActorConfig",
    "ClientConfig",
    "EvaluatorConfig",
    "Hyperparams",
    "LaunchConfig",
    "LearnerConfig",
    "ServerConfig",
    "default_error_buffer",
    "describe_generic_defaults",
    "untuned_warnings",
    "generic_defaults",
    "hyperparams_for",
    "parse_env_kwargs",
    "validate_address",
    "validate_rate_limit",
    "variable_update_interval_for",
]
