"""One tool for the focused measurements: each mode answers one question about a cost.

    python benchmarks/probe.py MODE [its flags]     # python benchmarks/probe.py MODE --help

Each mode was a script of its own (`python benchmarks/MODE.py ...`, with the same flags),
and its findings are in benchmarks/LEARNING.md, benchmarks/README.md or the README with
the command that produced them. The modes live in benchmarks/probes/, one module each,
imported only when asked for: `update_parity_sb3` runs under benchmarks/.venv-sb3, which
has no TensorFlow.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Dict, List, Optional

if __package__ in (None, ""):  # run as a file: the repo root, so that `benchmarks` imports
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# mode: what it measures (one line each; the module's docstring has the rest).
MODES: Dict[str, str] = {
    "per_step_cost": "one SGD step, uniform vs prioritized replay, at one batch",
    "crossq_cost": "one CrossQ update against one SAC update, by critic width",
    "pull_cost": "what one weight pull (and server_info) costs an actor",
    "job_cpu": "the CPU seconds of each job of one sac-launch run",
    "startup_timeline": "where a run's seconds go before its first eval at a target",
    "recovery_cost": "a learner's reconnect, piece by piece; gRPC's reconnect backoff",
    "replay_checkpoint_time": "how long a server takes to checkpoint a full replay table",
    "eval_noise": "the noise of an N-episode mean greedy return",
    "pixel_replay_bytes": "server memory per stored pixel transition, (s, s') vs frames once",
    "pixel_update_cost": "a DrQ-style pixel SAC update and one conv action, by path",
    "pixel_actor_rate": "an actor on a camera env against the rendered env alone",
    "update_parity": "whether one update of ours is SB3's update (needs make bench-sb3)",
    "update_parity_sb3": "update_parity's SB3 side, run under benchmarks/.venv-sb3",
}
SCRIPT = os.path.abspath(__file__)


def usage() -> str:
    width = max(len(m) for m in MODES)
    lines = [__doc__.split("\n\n")[0], "", "usage: probe.py MODE [flags]", "", "modes:"]
    lines += [f"  {mode:<{width}}  {text}" for mode, text in MODES.items()]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    mode, rest = argv[0], argv[1:]
    if mode not in MODES:
        print(f"probe.py: unknown mode {mode!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"benchmarks.probes.{mode}")
    sys.argv = [f"probe.py {mode}", *rest]  # argparse's usage line names the mode
    return module.main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
