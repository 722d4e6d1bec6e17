"""The tiny algorithm's registry entry: no prioritized replay, one replica, and a
preset adjustment a test can see (the actor's log std clipped)."""

import dataclasses

from sac_distributed.algorithm.registry import Algorithm, require

NAME = "tiny_sac"
CHECKPOINT_KEY = "tiny_agent"


def check(hparams) -> None:
    if hparams.algorithm == NAME:
        require(not hparams.prioritized_replay, "--algorithm=tiny_sac has no prioritized replay.")


def adjust_preset(base):
    return dataclasses.replace(base, clip_policy_log_std=True)


def check_strategy(strategy: str) -> None:
    require(strategy == "default", f"--algorithm=tiny_sac runs one replica, got {strategy!r}.")


ALGORITHM = Algorithm(
    name=NAME,
    title="TinySAC",
    learner="tiny_algorithm.learner:TinyLearner",
    checkpoint_key=CHECKPOINT_KEY,
    help="a test's SacAgent, trained through its public train",
    check=check,
    adjust_preset=adjust_preset,
    check_strategy=check_strategy,
)
