"""Flags shared by every binary, and the one place that turns them into configs.

Hyperparameter flags default to None, meaning "take the environment's preset"
(sac_distributed.config.PRESETS), so every job resolves the same values.
"""

from __future__ import annotations

import dataclasses
import logging as std_logging
import os
import signal
import sys
import warnings
from typing import Callable, Dict, List, Optional, Sequence

from absl import app, flags, logging

from sac_distributed import config as config_lib
from sac_distributed.algorithm import registry
from sac_distributed.algorithm.crossq import config as crossq_config
from sac_distributed.errors import USER_ERRORS, StoppedWhileWaitingError
from sac_distributed.run_info import check_same_run
from sac_distributed.runtime import check_root_dir

FLAGS = flags.FLAGS

flags.DEFINE_string("root_dir", None, "Directory for checkpoints, policies, summaries, results.")
flags.DEFINE_string(
    "env_name",
    config_lib.DEFAULT_ENV_NAME,
    "The env: a gym or pybullet id (Pendulum-v1), a Gymnasium id (HalfCheetah-v5; "
    "gymnasium:Pendulum-v1 for an id both register), or module:factory for your own env.",
)
flags.DEFINE_string(
    "env_kwargs",
    "",
    "Keyword arguments for the env's factory or make, as a JSON object: "
    """'{"goal_radius": 0.1}'.""",
)
flags.DEFINE_string(
    "replay_buffer_server_address",
    f"localhost:{config_lib.DEFAULT_PORT}",
    "host:port of the Reverb server holding the replay table; several, comma-separated, "
    "when the replay is sharded over servers (one per shard, in shard order).",
)
flags.DEFINE_string(
    "variable_container_server_address",
    f"localhost:{config_lib.DEFAULT_PORT}",
    "host:port of the Reverb server holding the variable container (may be the same).",
)
flags.DEFINE_float("connect_timeout", 300.0, "Seconds to wait for the Reverb server.")
flags.DEFINE_float(
    "shard_probe_interval",
    15.0,
    "Seconds between pings of a replay shard that stopped answering; the job takes it "
    "back once it answers (actor: its home shard; learner: every missing shard).",
)
flags.DEFINE_boolean(
    "verbose",
    False,
    "Show TensorFlow's, gym's and other libraries' start-up messages and warnings "
    "(hidden by default so that an error is the last thing on the screen).",
)
flags.DEFINE_integer("seed", None, "Random seed for the environment and the policy.")

# Hyperparameters, named as in the TF-Agents SAC Minitaur tutorial.
flags.DEFINE_integer("initial_collect_steps", None, "Random-policy steps before training.")
flags.DEFINE_integer("replay_buffer_capacity", None, "Transitions kept in the replay table.")
flags.DEFINE_integer("batch_size", None, "Transitions per SGD step.")
flags.DEFINE_float("critic_learning_rate", None, "Adam learning rate of the critics.")
flags.DEFINE_float("actor_learning_rate", None, "Adam learning rate of the policy.")
flags.DEFINE_float("alpha_learning_rate", None, "Adam learning rate of the temperature.")
flags.DEFINE_float("target_update_tau", None, "Polyak factor of the target critics.")
flags.DEFINE_integer("target_update_period", None, "Train steps between target updates.")
flags.DEFINE_float("gamma", None, "Discount factor.")
flags.DEFINE_float("reward_scale_factor", None, "Reward multiplier in the critic target.")
flags.DEFINE_list("actor_fc_layer_params", None, "Policy MLP layer sizes, e.g. 256,256.")
flags.DEFINE_list("critic_joint_fc_layer_params", None, "Critic MLP layer sizes, e.g. 256,256.")
flags.DEFINE_integer("policy_save_interval", None, "Train steps between SavedModel exports.")
flags.DEFINE_integer("num_iterations", None, "Total train steps.")
flags.DEFINE_integer("eval_interval", None, "Train steps between evaluations.")
flags.DEFINE_integer("num_eval_episodes", None, "Episodes per evaluation.")
flags.DEFINE_boolean(
    "wait_for_eval",
    None,
    "The learner waits at every --eval_interval until the evaluator has evaluated those "
    "weights (an evaluation at every multiple, as in a one-process loop; needs the "
    "evaluator's root_dir/eval/results.csv readable by the learner).",
)
flags.DEFINE_integer(
    "transitions_per_item",
    None,
    "Consecutive transitions per replay item: fewer items, less server memory, but the "
    "transitions of one item are correlated unless --num_envs > 1 interleaves envs.",
)
flags.DEFINE_boolean(
    "normalize_observations",
    None,
    "Train on observations normalized by running mean/std (the learner keeps them and "
    "sends them to actors with the weights). Only the learner's value counts.",
)
flags.DEFINE_integer(
    "n_step",
    None,
    "n-step returns: each replay transition sums n discounted rewards (actors build them).",
)
flags.DEFINE_float(
    "target_entropy",
    None,
    "Entropy the temperature steers the policy to (unset: "
    "--target_entropy_per_action_dim x dim(A)).",
)
flags.DEFINE_float(
    "target_entropy_per_action_dim",
    None,
    "The target entropy per action dimension where --target_entropy is unset: -0.5 is "
    "TF-Agents' -dim(A)/2 (the presets'), -1 the SAC paper's and SB3's -dim(A) (an env "
    "without a preset).",
)
flags.DEFINE_boolean(
    "prioritized_replay",
    None,
    "Sample replay by priority (|TD error| set by the learner) with importance weights "
    "in the critic loss, instead of uniformly.",
)
flags.DEFINE_float(
    "priority_exponent", None, "Prioritized replay's alpha: P(i) ~ priority**alpha (0.6)."
)
flags.DEFINE_float(
    "importance_sampling_exponent",
    None,
    "Prioritized replay's beta: critic loss weights (N*P(i))**-beta, batch-max normalized (0.4).",
)
flags.DEFINE_enum(
    "learning_rate_schedule",
    None,
    list(config_lib.LEARNING_RATE_SCHEDULES),
    "constant, or linear: every learning rate falls linearly to 0 at --num_iterations.",
)
flags.DEFINE_enum(
    "network_init",
    None,
    list(config_lib.NETWORK_INITS),
    "glorot (TF-Agents': Glorot-uniform kernels, zero biases) or torch (PyTorch's "
    "nn.Linear default, as SB3 trains: kernels and biases uniform in +-1/sqrt(fan_in)).",
)
flags.DEFINE_float(
    "policy_averaging_tau",
    None,
    "0: off. Else actors, the evaluator and exports get a Polyak average of the actor's "
    "weights, updated by this fraction every train step (0.001: about the last 1000 steps).",
)
flags.DEFINE_boolean(
    "clip_policy_log_std",
    None,
    "Clip the actor's log std to [-20, 2] before exp (SB3's and TF-Agents' "
    "std_clip_transform). Off: TF-Agents' default, unclipped; on for --algorithm=crossq, "
    "as in the CrossQ authors' code.",
)
flags.DEFINE_float(
    "adam_epsilon", None, "Adam's epsilon for every optimizer (Keras: 1e-7, PyTorch/SB3: 1e-8)."
)
flags.DEFINE_float(
    "squash_log_prob_epsilon",
    None,
    "0: the policy's exact tanh log-probability (TF-Agents). SB3 uses 1e-6: "
    "log(1 - tanh(u)^2 + eps), which caps the entropy cost of saturated actions.",
)
flags.DEFINE_boolean(
    "critic_layer_norm",
    None,
    "Normalize each critic hidden layer (Dense, LayerNorm, ReLU). Off: TF-Agents' "
    "CriticNetwork (Dense, ReLU).",
)
flags.DEFINE_enum(
    "critic_loss",
    None,
    list(config_lib.CRITIC_LOSSES),
    "Loss on each critic's TD error: squared (TF-Agents, SB3) or huber (linear beyond 1).",
)
flags.DEFINE_enum(
    "algorithm",
    None,
    registry.names(),
    "The learner's update: "
    + "; ".join(f"{entry.name} ({entry.help})" for entry in registry.entries())
    + f". More with {registry.ALGORITHMS_ENV}=module:attr (see docs/concepts.md).",
)
flags.DEFINE_list(
    "crossq_ablations",
    None,
    "For ablation studies: CrossQ's pieces to turn back to SAC's, comma-separated, from "
    + ", ".join(crossq_config.ABLATIONS)
    + " (needs --algorithm=crossq).",
)
flags.DEFINE_integer(
    "frame_stack",
    None,
    "An env observing one uint8 image (a camera): its last N frames form each "
    "observation, stacked along the channels (DrQ: 3). Vector observations ignore it.",
)
flags.DEFINE_integer(
    "action_repeat",
    None,
    "Play each action this many env steps, summing rewards (1: off; DrQ on DMC pixels: "
    "4 cheetah-run, 2 walker-walk, 8 cartpole). Steps are counted in policy steps.",
)
flags.DEFINE_float(
    "initial_alpha",
    None,
    "The entropy temperature before the first update, learned from there (TF-Agents "
    "and SB3: 1; DrQ and SAC-AE start pixel SAC at 0.1).",
)
flags.DEFINE_string(
    "conv_dtype",
    None,
    "Camera observations: what the learner's conv encoder computes in, float32 or "
    "bfloat16 (1.45x the updates/s on 2 AVX512-BF16 cores; weights, actors and exports "
    "stay float32).",
)
flags.DEFINE_boolean(
    "rescale_actions",
    None,
    "Act on [-1, 1] and rescale each action to the env's bounds in its step, as SB3's "
    "policies do (critics, log-probs and the entropy target on [-1, 1]; exports act in "
    "the env's bounds). On for an env without a preset; off: TF-Agents' squash to the bounds.",
)
flags.DEFINE_float(
    "samples_per_insert",
    None,
    "Samples per inserted transition held by SampleToInsertRatio (0: MinSize, no ratio).",
)

HPARAM_FLAGS = tuple(f.name for f in dataclasses.fields(config_lib.Hyperparams))
SHARED_FLAGS = (
    "root_dir",
    "env_name",
    "env_kwargs",
    "replay_buffer_server_address",
    "variable_container_server_address",
    "connect_timeout",
    "shard_probe_interval",
    "seed",
    "verbose",
) + HPARAM_FLAGS


def hyperparams() -> config_lib.Hyperparams:
    overrides: Dict[str, object] = {name: FLAGS[name].value for name in HPARAM_FLAGS}
    for name in ("actor_fc_layer_params", "critic_joint_fc_layer_params"):
        if overrides[name] is not None:
            overrides[name] = _int_list(name, overrides[name])
    return config_lib.hyperparams_for(FLAGS.env_name, overrides)


def _int_list(name: str, values) -> tuple:
    try:
        return tuple(int(v) for v in values)
    except ValueError as e:
        raise config_lib.ConfigError(
            f"--{name} must be comma-separated integers such as 256,256, got {values!r}."
        ) from e


def client_config(replay_defaults_to_variables: bool = False) -> config_lib.ClientConfig:
    """The server addresses; with `replay_defaults_to_variables`, an unset
    --replay_buffer_server_address means the variable container's server (the
    evaluator reads only a count from the replay, which lives there by default)."""
    replay_address = FLAGS.replay_buffer_server_address
    if replay_defaults_to_variables and not FLAGS["replay_buffer_server_address"].present:
        replay_address = FLAGS.variable_container_server_address
    return config_lib.ClientConfig(
        replay_buffer_server_address=replay_address,
        variable_container_server_address=FLAGS.variable_container_server_address,
        connect_timeout_s=FLAGS.connect_timeout,
        shard_probe_interval_s=FLAGS.shard_probe_interval,
    )


def root_dir() -> str:
    """--root_dir, checked to be a writable directory (created if missing)."""
    if not FLAGS.root_dir:
        raise config_lib.ConfigError("--root_dir is required (a directory shared by all jobs).")
    check_root_dir(FLAGS.root_dir)
    return FLAGS.root_dir


# Exit statuses of a job stopped by a signal before it started its work.
_STOPPED_WHILE_STARTING = {signal.SIGTERM: 0, signal.SIGINT: 130}


def refuse_another_run(config) -> None:
    """A job's refusal of a root_dir that holds another run, made before the job
    imports TensorFlow: a wrong flag costs a second, not the import's tens of
    seconds on a loaded machine (the job checks again where it starts in-process)."""
    check_same_run(config.root_dir, config.env_name, config.hparams, config.env_kwargs)


def run_job(main: Callable[[], Optional[int]], help_flags: Sequence[str] = SHARED_FLAGS) -> None:
    """`run` for the job binaries (server, actor, learner, evaluator).

    Until the job installs its own StopSignal, after TensorFlow's import (tens
    of seconds on a loaded machine), SIGTERM or SIGINT ends it at once with
    status 0 (130 for SIGINT): it has written nothing yet, so a supervisor's
    stop or a restart loop's kill in that window is a clean stop, not a death
    by signal.
    """
    for signum in _STOPPED_WHILE_STARTING:
        signal.signal(signum, _stop_while_starting)
    run(main, help_flags)


def _stop_while_starting(signum: int, _frame) -> None:
    name = signal.Signals(signum).name
    print(f"Received {name} while starting, before any work: exiting.", file=sys.stderr)
    _exit_now(_STOPPED_WHILE_STARTING[signal.Signals(signum)])


def run(main: Callable[[], Optional[int]], help_flags: Sequence[str] = SHARED_FLAGS) -> None:
    """absl entry point: user errors in one clear line (exit 2), then a prompt exit.

    `--help` (and `--helpshort`) list the flags the binary defines and
    `help_flags`, the shared ones it reads; `--helpfull` adds absl's own.

    The process ends with os._exit once `main` has returned: by then every job
    has written, flushed and closed its files (checkpoints, exports, summaries,
    the replay checkpoint), and the interpreter's own shutdown with TensorFlow
    and Reverb objects alive (traced functions, datasets, gRPC channels) kept
    a finished learner alive 9 s after a 3,000-step Pendulum-v1 run (and, as
    issue 10 reports, about 60 s after a 30,000-step InvertedPendulum run),
    with nothing left to do.
    """

    def _main(argv):
        if len(argv) > 1:  # absl would print the whole --help above it, and exit 1
            print(
                f"error: Unexpected arguments {argv[1:]}: every option is a --flag=value "
                "(--help lists the flags)",
                file=sys.stderr,
            )
            _exit_now(2)
        if not FLAGS.verbose:
            quiet_libraries()
        try:
            code = main() or 0
        except StoppedWhileWaitingError as e:  # a stop signal, not a failure
            logging.info("%s", e)
            code = 0
        except USER_ERRORS as e:
            print(f"error: {e}", file=sys.stderr)  # the one line a user needs
            code = 2
        _exit_now(code)

    _list_in_help(main, help_flags)
    app.run(_main, flags_parser=_parse_flags)


def _list_in_help(main: Callable, shared: Sequence[str]) -> None:
    """Makes the binary's own flags and `shared` the key flags of the program.

    absl's --help lists the key flags of `sys.argv[0]`, which for a console
    script is a generated file that defines none; its usage text is
    `__main__`'s docstring, which that file lacks, so the binary's is used.
    """
    module = main.__module__  # "__main__" under `python -m`: absl maps it to argv[0]
    own: List[flags.Flag] = FLAGS.get_flags_for_module(module)
    for flag in own + [FLAGS[name] for name in shared]:
        FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    main_module = sys.modules["__main__"]
    if not main_module.__doc__:
        main_module.__doc__ = sys.modules[module].__doc__


def _parse_flags(argv: List[str]) -> List[str]:
    """absl's parse, with a flag error as a user error (one line, exit 2) and
    --help as a success (exit 0; absl exits 1 after printing it)."""
    try:
        return FLAGS(argv)
    except flags.Error as e:
        message = " ".join(str(e).split())
        print(f"error: {message} (--help lists the flags)", file=sys.stderr)
        sys.exit(2)
    except SystemExit as e:  # only the help flags exit while flags are parsed
        sys.exit(0 if e.code == 1 else e.code)


def quiet_libraries() -> None:
    """Hides library start-up chatter and warnings; our own absl logs stay."""
    warnings.filterwarnings("ignore")
    for name in ("tensorflow", "tf_keras", "gym", "h5py", "matplotlib"):
        std_logging.getLogger(name).setLevel(std_logging.ERROR)


def _exit_now(code: int) -> None:
    logging.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
