"""What every learning-benchmark runner shares: its arguments and its results file.

The peers (`peer_stock.py`, `peer_sb3.py`) and our evaluator write the same
results.csv (train_step, env_steps, average_return, average_episode_length,
wall_time) through `sac_distributed.results`, so `learning.py` reads every run
alike. This module imports neither TensorFlow nor torch: the SB3 peer runs in
its own virtualenv (torch needs a newer typing_extensions than tf-agents pins),
which has no sac_distributed installed: the peer scripts put the repository root on
the path, which makes `sac_distributed.results` (standard library only) importable.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable, Dict, List, Optional

from sac_distributed.paths import RESULTS_HEADER
from sac_distributed.results import EpisodeLog, EvalPoint, append_result

__all__ = ["RESULTS_HEADER", "ResultsWriter", "episode_log", "hparam", "parse_args"]


def parse_args(
    argv: Optional[List[str]],
    description: str,
    add_own: Optional[Callable[[argparse.ArgumentParser], None]] = None,
) -> argparse.Namespace:
    """The arguments `learning.py` passes to every peer runner; `add_own` adds a
    peer's own options (those its variants may set)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--env_name", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--env_steps", type=int, required=True, help="total env steps, warm-up included")
    p.add_argument("--eval_every", type=int, required=True, help="env steps between evaluations")
    p.add_argument("--num_eval_episodes", type=int, required=True)
    p.add_argument("--utd", type=float, default=1.0, help="SGD steps per env step after warm-up")
    p.add_argument("--hparams_json", required=True, help="the resolved Hyperparams as JSON")
    p.add_argument("--results", required=True, help="results.csv to append rows to")
    p.add_argument(
        "--episodes",
        default=None,
        help="episodes.csv to log each training episode to (the actors' format); unset: none",
    )
    if add_own is not None:
        add_own(p)
    args = p.parse_args(argv)
    args.hparams = json.loads(args.hparams_json)
    # With SB3's own defaults (peer_sb3 --own_defaults) the warm-up is SB3's, not ours.
    warm_up = 0 if getattr(args, "own_defaults", False) else args.hparams["initial_collect_steps"]
    if args.env_steps <= warm_up:
        p.error(
            f"--env_steps ({args.env_steps}) must exceed initial_collect_steps "
            f"({args.hparams['initial_collect_steps']}): nothing would be trained."
        )
    return args


class ResultsWriter:
    """Appends evaluation rows in the evaluator's format (sac_distributed.results)."""

    def __init__(self, path: str):
        self.path = path

    def add(
        self, train_step: int, env_steps: int, returns: List[float], lengths: List[float]
    ) -> None:
        """One evaluation: the means of its episodes' returns and lengths, timed now."""
        point = EvalPoint(
            int(train_step),
            int(env_steps),
            sum(returns) / len(returns),
            sum(lengths) / len(lengths),
            time.time(),
        )
        append_result(self.path, point)
        print(
            f"eval env_steps={env_steps} train_step={train_step} return={point.average_return:.3f}",
            flush=True,
        )


def episode_log(args: argparse.Namespace) -> Optional[EpisodeLog]:
    """The training-episodes log --episodes names, or None without it."""
    return EpisodeLog(args.episodes) if args.episodes else None


def hparam(hparams: Dict[str, Any], name: str) -> Any:
    """One hyperparameter, with a clear error when the JSON lacks it."""
    if name not in hparams:
        raise SystemExit(f"--hparams_json has no {name!r}; pass the full resolved Hyperparams.")
    return hparams[name]
