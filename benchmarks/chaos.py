"""Chaos over a run: seeded SIGKILL/SIGTERM of any job, restarts, a ledger, checks.

Starts server(s), N actors, the learner and the evaluator with the argv that
`sac-launch` uses (`job_definitions`), kills jobs on a seeded schedule, restarts
each after it exited (with a short seeded delay, as a restart loop would), and
writes `ledger.jsonl` (every start, kill, exit, restart, replay checkpoint and
replay counters) and `summary.json` (checks and recovery figures) under
--out. Then it checks that the learner reached num_iterations, that train steps
never went back past a checkpoint, that every replay loss is explained by a
kill between a write and a checkpoint and the replay holds the rest, that the
greedy policy loads, and reports the final greedy return (against an
undisturbed run of the same seed and budget with --baseline, and the late
return against the seed spread of undisturbed runs with --undisturbed or
undisturbed_* folders in --out). Exits 1 when a check fails, naming it.

    python benchmarks/chaos.py --env_name=Pendulum-v1 --num_iterations=3000 \\
        --kills=server:KILL,learner:TERM,actor:KILL,server:TERM --out=/tmp/chaos
    python benchmarks/chaos.py --num_kills=20 --interval_s=60,180 ...   # a long run
    python benchmarks/chaos.py --check_only --out=/tmp/chaos            # checks again

See bench/chaos.py for the schedule and the ledger, bench/chaos_checks.py for
what each check reads.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Optional

if __package__ in (None, ""):  # run as a file: the repo root, so that `benchmarks` imports
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchmarks.bench import chaos, chaos_checks, chaos_recovery  # noqa: E402
from sac_distributed import config as config_lib  # noqa: E402

SUMMARY_FILE = "summary.json"


def _pair(text: str) -> tuple:
    lo, hi = (float(v) for v in text.split(","))
    return lo, hi


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--out", required=True, help="ledger, summary and (by default) the runs' root_dirs"
    )
    p.add_argument("--check_only", action="store_true", help="only check the ledger in --out")
    p.add_argument("--env_name", default="Pendulum-v1")
    p.add_argument("--seed", type=int, default=0, help="the run's seed and the schedule's")
    p.add_argument("--num_actors", type=int, default=2)
    p.add_argument("--num_replay_shards", type=int, default=1)
    p.add_argument("--hparams", default="{}", help="JSON of hyperparameter overrides")
    p.add_argument("--num_iterations", type=int, default=None, help="overrides the preset's")
    p.add_argument("--kills", default="", help="kind or job:KILL|TERM|ANY,... in order")
    p.add_argument("--num_kills", type=int, default=6, help="without --kills: random kills")
    p.add_argument(
        "--interval_s",
        type=_pair,
        default=(5.0, 15.0),
        help="seconds between a restart and the next kill (seeded uniform)",
    )
    p.add_argument(
        "--restart_delay_s",
        type=_pair,
        default=(0.5, 3.0),
        help="seconds a killed job stays down after it exited (seeded uniform)",
    )
    p.add_argument(
        "--step_span",
        type=_pair,
        default=None,
        help="lo,hi fractions of num_iterations: kill k also waits for a seeded step",
    )
    p.add_argument("--replay_checkpoint_interval_s", type=float, default=10.0)
    p.add_argument("--checkpoint_interval", type=int, default=None, help="the learner's")
    p.add_argument(
        "--summary_interval",
        type=int,
        default=None,
        help="the learner's (its train_step lines); default num_iterations / 50",
    )
    p.add_argument("--max_run_s", type=float, default=3600.0)
    p.add_argument(
        "--min_kills",
        type=int,
        default=None,
        help="kills the checks require (default: every planned one)",
    )
    p.add_argument(
        "--baseline",
        action="store_true",
        help="also run undisturbed with the same seed and budget first",
    )
    p.add_argument(
        "--baseline_return",
        type=float,
        default=None,
        help="the undisturbed run's final return, when already known",
    )
    p.add_argument(
        "--return_tolerance",
        type=float,
        default=None,
        help="max |chaos - baseline| final greedy return",
    )
    p.add_argument(
        "--undisturbed",
        default=None,
        help="comma-separated --out folders of runs with --num_kills=0 (other seeds, same "
        "budget): the mean return of the last tenth of evaluations must be at least the "
        "worst of theirs (default: every undisturbed_* folder in --out)",
    )
    p.add_argument(
        "--source_dir",
        default=None,
        help="jobs import sac_distributed from this tree (e.g. a git worktree)",
    )
    return p.parse_args(argv)


def make_settings(args, out_dir: str, kills) -> chaos.ChaosSettings:
    overrides = json.loads(args.hparams)
    if args.num_iterations is not None:
        overrides["num_iterations"] = args.num_iterations
    hparams = config_lib.hyperparams_for(args.env_name, overrides)
    launch = config_lib.LaunchConfig(
        root_dir=os.path.join(out_dir, "root"),
        env_name=args.env_name,
        hparams=hparams,
        num_actors=args.num_actors,
        seed=args.seed,
        num_replay_shards=args.num_replay_shards,
        connect_timeout_s=600.0,
        shard_probe_interval_s=3.0,
    )
    n = hparams.num_iterations
    learner = {"summary_interval": args.summary_interval or max(1, n // 50)}
    learner["checkpoint_interval"] = args.checkpoint_interval or max(1, n // 10)
    return chaos.ChaosSettings(
        launch=launch,
        out_dir=out_dir,
        kills=tuple(kills),
        job_overrides={
            "server": {
                "replay_checkpoint_interval_s": args.replay_checkpoint_interval_s,
                "stats_interval_s": 10.0,
            },
            "learner": learner,
        },
        source_dir=args.source_dir,
        max_run_s=args.max_run_s,
        min_kills=args.min_kills,
    )


def plan_kills(args, settings: chaos.ChaosSettings):
    plan = [tuple(item.split(":")) for item in args.kills.split(",") if item] or chaos.random_plan(
        args.seed, args.num_kills
    )
    names = [s.name for s in chaos.make_specs(settings)[0]]
    return chaos.make_schedule(
        args.seed,
        names,
        plan,
        args.interval_s,
        args.restart_delay_s,
        settings.launch.hparams.num_iterations,
        args.step_span,
    )


def run(settings: chaos.ChaosSettings) -> None:
    from benchmarks.bench.chaos_run import ChaosRun

    started = time.monotonic()
    ChaosRun(settings).run()
    print(
        f"chaos: {os.path.basename(settings.out_dir)} ran {time.monotonic() - started:.0f} s",
        flush=True,
    )


def undisturbed_returns(out: str, dirs: Optional[str], num_iterations: int) -> dict:
    """Late returns (`chaos_checks.late_return`) of the undisturbed runs (each a chaos.py
    --out with no kills) named by --undisturbed, or by default every undisturbed_* folder
    in `out`. A named run without late evaluations is an error; a found one that has
    not got there yet (it may still run beside this one) is left out, with a line."""
    if dirs:
        folders = [os.path.abspath(d) for d in dirs.split(",") if d]
    else:
        names = sorted(n for n in os.listdir(out) if n.startswith("undisturbed_"))
        folders = [os.path.join(out, n) for n in names]
    spread = {}
    for folder in folders:
        value = chaos_checks.late_return(os.path.join(folder, "root"), num_iterations)
        if value is not None:
            spread[os.path.basename(folder)] = value
            continue
        missing = f"no returns from the last tenth of {num_iterations} steps in {folder}/root"
        if dirs:
            raise SystemExit(f"chaos: {missing}: is that run finished?")
        print(f"chaos: left out of the seed spread, {missing} (check again with --check_only)")
    return spread


def _stop_on_signals() -> None:
    """SIGTERM and SIGINT (even when started in the background) end the run through its
    `finally`, which SIGKILLs the jobs it started (they run in sessions of their own)."""

    def stop(signum, _frame):
        raise SystemExit(f"chaos: stopped by signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def main(argv=None) -> int:
    args = parse_args(argv)
    _stop_on_signals()
    out = os.path.abspath(args.out)
    baseline = args.baseline_return
    if not args.check_only:
        if args.baseline:
            base = make_settings(args, os.path.join(out, "baseline"), [])
            run(base)
            baseline = chaos_checks.final_return(base.launch.root_dir)[1]
        settings = make_settings(args, out, [])
        settings = make_settings(args, out, plan_kills(args, settings))
        run(settings)
    elif baseline is None and os.path.exists(os.path.join(out, "baseline", chaos.LEDGER_FILE)):
        baseline = chaos_checks.final_return(os.path.join(out, "baseline", "root"))[1]
    num_iterations = chaos_checks.RunRecord(out).run["num_iterations"]
    spread = undisturbed_returns(out, args.undisturbed, num_iterations)
    checks, notes = chaos_checks.run_checks(
        out, baseline, args.return_tolerance, list(spread.values())
    )
    figures = chaos_recovery.recoveries(out)
    for note in notes:
        print(f"  {note}")
    for row in figures:
        print(f"  recovery {json.dumps(row)}")
    print(chaos_checks.format_checks(checks), flush=True)
    with open(os.path.join(out, SUMMARY_FILE), "w") as f:
        json.dump(
            {
                "checks": [c.__dict__ for c in checks],
                "notes": notes,
                "recoveries": figures,
                # Each actor incarnation's own count at its stop (SIGKILLed ones say nothing).
                "actor_stops": chaos_checks.actor_stops(chaos_checks.RunRecord(out)),
                "baseline_return": baseline,
                "undisturbed_returns": spread,
            },
            f,
            indent=1,
        )
    failed = [c.name for c in checks if not c.passed]
    if failed:
        print(f"chaos: FAILED: {'; '.join(failed)}", flush=True)
        return 1
    print("chaos: all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except SystemExit as stopped:  # a signal (see _stop_on_signals) or argparse
        code = stopped.code if isinstance(stopped.code, int) else 1
        if not isinstance(stopped.code, int):
            print(stopped.code, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    # TensorFlow's threads (imported with Reverb's client) can hold interpreter
    # shutdown for many seconds; the jobs are stopped and the files written.
    os._exit(code)
