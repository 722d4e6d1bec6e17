"""Learning benchmark: envs x systems x seeds at a fixed update-to-data ratio.

Each run trains to an env-step budget and leaves the evaluator's results.csv
(greedy return every --eval_every env steps). Systems:

  ours   the real distributed job: `sac-launch` (server, actors, learner and
         evaluator as processes) with SampleToInsertRatio = batch_size * utd,
         so the learner does `utd` SGD steps per env step after the warm-up,
         and --wait_for_eval, so that every --eval_every mark is evaluated as in
         the one-process peers (--async_eval: the evaluator skips marks when busy);
  stock  the TF-Agents SAC tutorial loop in one process (peer_stock.py);
  sb3    Stable-Baselines3 SAC on torch (peer_sb3.py, its own virtualenv);
  sb3defaults  the same with SB3's own defaults, not the preset's: what
         `SAC("MlpPolicy", env)` trains with (the yardstick for untuned envs);
  sb3loop  TF-Agents' SacAgent (ours) inside SB3's training loop (peer_sb3loop.py):
         the hybrid that splits the update from the data path.

All get the same preset hyperparameters (plus --common_flags); a variant
(`--variants="k1=--transitions_per_item=1;lag100=..."`) adds flags to ours and
the hybrid (hyperparameters and its own options) only, for ablations; the
named variants in `NAMED_VARIANTS` may be given by name alone
(`--variants=preset,per`: the preset without and with prioritized replay).
Finished runs are kept under
OUT/runs/<env>/<system>-<variant>/seed<N>/ (results.csv + run.json) and never
redone, so a sweep resumes where it stopped. After every run OUT/summary.md,
OUT/summary.json and OUT/<env>.png are rewritten from everything in OUT.
Ctrl-C (or SIGTERM) stops the runs in progress as sac-launch stops its jobs and
exits 130; they are not recorded, and the same command starts them over.

    python benchmarks/learning.py --envs=Pendulum-v1 --seeds=0,1,2 --env_steps=20000
    python benchmarks/learning.py --envs=HalfCheetahBulletEnv-v0 --systems=ours,sb3 \\
        --env_steps=100000 --eval_every=5000 --parallel=1
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import glob
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))

if __package__ in (None, ""):  # run as a file: the repo root, so that `benchmarks` imports
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from benchmarks import learning_report  # noqa: E402
from benchmarks.bench.sac_launch import parse_named_flags, sac_launch_executable  # noqa: E402

SYSTEMS = ("ours", "stock", "sb3", "sb3loop", "sb3defaults")
# The systems that run SB3 in its own virtualenv (--sb3_python).
SB3_SYSTEMS = ("sb3", "sb3defaults")
# The systems --variants applies to: ours (any sac-launch flag) and the hybrid
# (hyperparameter flags and its own, peer_sb3loop.OWN_FLAGS).
VARIANT_SYSTEMS = ("ours", "sb3loop")
DEFAULT_OUT = os.path.join(_HERE, "results", "learning")
DEFAULT_SB3_PYTHON = os.path.join(_HERE, ".venv-sb3", "bin", "python")
RUN_FILE = "run.json"
# Variants that --variants accepts by name alone (comma-separated, or mixed with name=flags).
NAMED_VARIANTS = {"preset": "", "per": "--prioritized_replay"}
RESULTS_FILE = "results.csv"
# A run's copy of the learner's TensorBoard scalars (alpha, entropy, Q, losses),
# one row per summarized train step: what moved when a curve dipped.
LEARNER_FILE = "learner.csv"


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One training run: an env, a system with a variant of its flags, a seed."""

    env_name: str
    system: str
    variant: str
    flags: tuple
    seed: int

    @property
    def key(self) -> str:
        return f"{self.env_name}/{self.system}-{self.variant}/seed{self.seed}"


@dataclasses.dataclass(frozen=True)
class Budget:
    """What every run of the sweep shares."""

    env_steps: int
    eval_every: int
    num_eval_episodes: int
    utd: float
    common_flags: tuple
    async_eval: bool = False


def flags_to_overrides(flags: Sequence[str]) -> Dict[str, object]:
    """Hyperparameter overrides from '--name=value' flags, typed like Hyperparams."""
    from sac_distributed.config import Hyperparams

    fields = {f.name: f for f in dataclasses.fields(Hyperparams)}
    defaults = Hyperparams()
    overrides: Dict[str, object] = {}
    for flag in flags:
        name, _, value = flag.lstrip("-").partition("=")
        if name.startswith("no") and name[2:] in fields and not value:
            overrides[name[2:]] = False
            continue
        if name not in fields:
            continue  # not a hyperparameter (e.g. --num_actors): ours only
        default = getattr(defaults, name)
        if isinstance(default, bool):
            overrides[name] = value.lower() in ("", "1", "true")
        elif isinstance(default, tuple):  # layer sizes, or names (crossq_ablations)
            items = [v for v in value.split(",") if v]
            is_sizes = "int" in str(fields[name].type)
            overrides[name] = tuple(int(v) for v in items) if is_sizes else tuple(items)
        elif isinstance(default, int):
            overrides[name] = int(value)
        elif isinstance(default, str):
            overrides[name] = value
        else:
            overrides[name] = float(value)
    return overrides


def resolved_hparams(env_name: str, flags: Sequence[str]):
    """The preset for `env_name` with `flags` applied (validated)."""
    from sac_distributed.config import hyperparams_for

    return hyperparams_for(env_name, flags_to_overrides(flags))


def plan(args: argparse.Namespace) -> List[RunSpec]:
    """Every run of the sweep, seeds innermost so each configuration fills up in turn."""
    runs = []
    for env_name in args.envs:
        for system in args.systems:
            variants = args.variants if system in VARIANT_SYSTEMS else {"preset": ()}
            for variant, flags in variants.items():
                for seed in args.seeds:
                    runs.append(RunSpec(env_name, system, variant, flags, seed))
    return runs


def run_dir(out: str, spec: RunSpec) -> str:
    return os.path.join(out, "runs", spec.key)


def is_done(out: str, spec: RunSpec) -> bool:
    path = os.path.join(run_dir(out, spec), RUN_FILE)
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return json.load(f).get("status") == "done"


def command(spec: RunSpec, budget: Budget, work: str, sb3_python: str) -> List[str]:
    """The argv of one run; `work` is its scratch directory."""
    hp = resolved_hparams(spec.env_name, budget.common_flags + spec.flags)
    if spec.system == "ours":
        return _ours_command(spec, budget, hp, work)
    script = {
        "stock": "peer_stock.py",
        "sb3": "peer_sb3.py",
        "sb3defaults": "peer_sb3.py",
        "sb3loop": "peer_sb3loop.py",
    }
    python = sb3_python if spec.system in SB3_SYSTEMS else sys.executable
    own = [f for f in spec.flags if _flag_name(f) in _hybrid_own_flags()] if spec.flags else []
    if spec.system == "sb3defaults":
        own = ["--own_defaults"]
    return [
        python,
        "-u",
        os.path.join(_HERE, script[spec.system]),
        f"--env_name={spec.env_name}",
        f"--seed={spec.seed}",
        f"--env_steps={budget.env_steps}",
        f"--eval_every={budget.eval_every}",
        f"--num_eval_episodes={budget.num_eval_episodes}",
        f"--utd={budget.utd}",
        f"--hparams_json={json.dumps(dataclasses.asdict(hp))}",
        f"--results={os.path.join(work, RESULTS_FILE)}",
        f"--episodes={os.path.join(work, learning_report.episodes_file(0))}",
        *own,
    ]


def _flag_name(flag: str) -> str:
    return flag.lstrip("-").partition("=")[0]


def _hybrid_own_flags() -> tuple:
    from benchmarks import peer_sb3loop  # TensorFlow: imported only when a hybrid run is planned

    return peer_sb3loop.OWN_FLAGS


def _ours_command(spec: RunSpec, budget: Budget, hp, work: str) -> List[str]:
    train_steps = int(round((budget.env_steps - hp.initial_collect_steps) * budget.utd))
    return [
        sac_launch_executable(),
        f"--root_dir={os.path.join(work, 'root')}",
        f"--env_name={spec.env_name}",
        f"--seed={spec.seed}",
        f"--num_iterations={train_steps}",
        # The warm-up the budget assumed, spelled out so that the run's env steps
        # add up to the budget whatever default the run would take.
        f"--initial_collect_steps={hp.initial_collect_steps}",
        *_rate_flag(hp, budget),
        f"--eval_interval={max(1, int(round(budget.eval_every * budget.utd)))}",
        f"--num_eval_episodes={budget.num_eval_episodes}",
        *(() if budget.async_eval else ("--wait_for_eval",)),
        *budget.common_flags,
        *spec.flags,
    ]


def _rate_flag(hp, budget: Budget) -> tuple:
    """--samples_per_insert for `utd` SGD steps per env step, where the preset's
    own rate differs (every preset holds one per env step: utd 1 needs no flag)."""
    rate = hp.batch_size * budget.utd
    return () if hp.samples_per_insert == rate else (f"--samples_per_insert={rate}",)


class Running:
    """A run in progress: its process, scratch dir and start time."""

    def __init__(self, spec: RunSpec, argv: List[str], work: str):
        self.spec = spec
        self.argv = argv
        self.work = work
        self.started = time.time()
        os.makedirs(work, exist_ok=True)
        self._log = open(os.path.join(work, "output.log"), "w")
        self.process = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def results_path(self) -> str:
        if self.spec.system == "ours":
            return os.path.join(self.work, "root", "eval", RESULTS_FILE)
        return os.path.join(self.work, RESULTS_FILE)

    def episode_files(self) -> List[str]:
        """Each actor's training-episodes file, in task order (a peer has one)."""
        from sac_distributed import paths

        if self.spec.system != "ours":
            path = os.path.join(self.work, learning_report.episodes_file(0))
            return [path] if os.path.exists(path) else []
        return paths.actor_episode_files(os.path.join(self.work, "root"))

    def env_steps_so_far(self) -> int:
        try:
            points = learning_report.read_points(self.results_path())
        except (OSError, ValueError):
            return 0
        return points[-1].env_steps if points else 0

    def close_log(self) -> None:
        self._log.close()

    def finish(self, out: str, budget: Budget) -> dict:
        """Copies the results into OUT and writes run.json; returns its record."""
        self.close_log()
        target = run_dir(out, self.spec)
        os.makedirs(target, exist_ok=True)
        code = self.process.returncode
        record = {
            "key": self.spec.key,
            "status": run_status(code, self.results_path(), self.env_steps_so_far(), budget),
            "exit_code": code,
            "command": shlex.join(self.argv),
            "started": round(self.started, 1),
            "finished": round(time.time(), 1),
            "wall_s": round(time.time() - self.started, 1),
            "env_steps_budget": budget.env_steps,
            "utd": budget.utd,
            "eval_every": budget.eval_every,
            "num_eval_episodes": budget.num_eval_episodes,
        }
        if os.path.exists(self.results_path()):
            shutil.copyfile(self.results_path(), os.path.join(target, RESULTS_FILE))
        for task, path in enumerate(self.episode_files()):
            shutil.copyfile(path, os.path.join(target, learning_report.episodes_file(task)))
        if self.spec.system == "ours":
            from sac_distributed import paths

            export_learner_scalars(
                paths.train_dir(os.path.join(self.work, "root")),
                os.path.join(target, LEARNER_FILE),
            )
        if record["status"] != "done":
            with open(os.path.join(self.work, "output.log"), errors="replace") as f:
                record["output_tail"] = f.read()[-4000:]
        with open(os.path.join(target, RUN_FILE), "w") as f:
            json.dump(record, f, indent=1)
        if record["status"] == "done":
            shutil.rmtree(self.work, ignore_errors=True)  # checkpoints, replay: not kept
        return record


# A run whose last evaluation is short of this share of the budget did not finish,
# even where its process exited 0 (a job stopped from outside stops cleanly).
FINISHED_SHARE = 0.95


def run_status(code: Optional[int], results: str, env_steps: int, budget: Budget) -> str:
    """The run's status: done when it exited 0 with evaluations up to the budget,
    short when it exited 0 before that (it is run again, as a failed one is), else
    failed."""
    if code != 0 or not os.path.exists(results):
        return "failed"
    return "done" if env_steps >= FINISHED_SHARE * budget.env_steps else "short"


def export_learner_scalars(summary_dir: str, path: str) -> int:
    """Writes the scalars of the TensorBoard event files in `summary_dir` as a CSV.

    One row per train step (`train_step`, then one column per tag, sorted); a
    step summarized twice (a restarted learner) keeps its last value. Returns the
    number of rows; writes nothing when there are no events.
    """
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.util import tensor_util

    rows: Dict[int, Dict[str, float]] = {}
    for name in sorted(glob.glob(os.path.join(summary_dir, "events.out.tfevents.*"))):
        for event in event_file_loader.EventFileLoader(name).Load():
            for value in event.summary.value:
                if value.HasField("tensor"):
                    number = tensor_util.make_ndarray(value.tensor)
                elif value.HasField("simple_value"):
                    number = value.simple_value
                else:
                    continue
                if getattr(number, "size", 1) == 1:
                    rows.setdefault(event.step, {})[value.tag] = float(number)
    if not rows:
        return 0
    tags = sorted({tag for row in rows.values() for tag in row})
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["train_step", *tags])
        for step in sorted(rows):
            writer.writerow([step, *(_cell(rows[step].get(tag)) for tag in tags)])
    return len(rows)


def _cell(value: Optional[float]) -> str:
    return "" if value is None else f"{value:.6g}"


def sweep(args: argparse.Namespace) -> int:
    budget = Budget(
        args.env_steps,
        args.eval_every,
        args.num_eval_episodes,
        args.utd,
        args.common_flags,
        args.async_eval,
    )
    runs = plan(args)
    todo = [r for r in runs if not is_done(args.out, r)]
    _log(f"{len(runs)} runs planned, {len(runs) - len(todo)} already done, {len(todo)} to run")
    for spec in todo:  # fail on a bad flag before anything starts
        command(spec, budget, args.work_dir, args.sb3_python)
    running: List[Running] = []
    stop = StopRequest()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        failures = _run_all(args, budget, todo, running, stop)
        if stop.signum is not None:
            stop_runs(running)
            _log(
                f"{signal.Signals(stop.signum).name}: stopped {len(running)} run(s) in "
                "progress, not recorded; run the same command again to resume (those "
                "runs start over)"
            )
            return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if runs:
        learning_report.write_report(args.out)
    _log(f"sweep finished: {failures} failed run(s); report in {args.out}/summary.md")
    return 1 if failures else 0


class StopRequest:
    """A signal handler that records Ctrl-C or SIGTERM for the sweep loop to act on."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None

    def __call__(self, signum: int, frame) -> None:
        self.signum = signum


# sac-launch gives its clients, then its servers, up to 120 s each to stop.
STOP_GRACE_S = 300.0


def stop_runs(running: List[Running], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERMs each run's process (in its own session, so Ctrl-C never reached it)
    and waits, so that sac-launch stops its jobs in order; SIGKILLs what is left of
    a run's process group after `grace_s`."""
    for run in running:
        if run.process.poll() is None:
            run.process.terminate()
    deadline = time.monotonic() + grace_s
    for run in running:
        try:
            run.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _log(f"{run.spec.key} did not stop within {grace_s:.0f} s: SIGKILL")
            try:
                os.killpg(run.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            run.process.wait()
        run.close_log()


def _run_all(args, budget: Budget, todo: List[RunSpec], running: List[Running], stop) -> int:
    """Starts and collects runs, `args.parallel` at a time, until all are done or a
    stop is requested; returns the failures."""
    failures = 0
    sweep_start, last_progress = time.time(), 0.0
    while (todo or running) and stop.signum is None:
        while todo and len(running) < args.parallel and stop.signum is None:
            spec = todo.pop(0)
            work = os.path.join(args.work_dir, spec.key)
            shutil.rmtree(work, ignore_errors=True)
            argv = command(spec, budget, work, args.sb3_python)
            running.append(Running(spec, argv, work))
            _log(f"start {spec.key}: {shlex.join(argv)}")
        for run in [r for r in running if r.process.poll() is not None]:
            running.remove(run)
            record = run.finish(args.out, budget)
            failures += record["status"] != "done"
            _log(f"{record['status']} {run.spec.key} in {record['wall_s']:.0f} s")
            if record["status"] != "done":
                _log(f"  output tail:\n{record['output_tail'][-1500:]}")
            learning_report.write_report(args.out)
        if time.time() - last_progress >= args.progress_s:
            last_progress = time.time()
            _progress(running, todo, budget, sweep_start)
        time.sleep(1.0)
    return failures


def _progress(running: List[Running], todo: List[RunSpec], budget: Budget, start: float) -> None:
    for run in running:
        steps = run.env_steps_so_far()
        elapsed = time.time() - run.started
        eta = ""
        if steps > 0:
            eta = f", about {elapsed / steps * (budget.env_steps - steps) / 60:.0f} min left"
        _log(f"  {run.spec.key}: {steps}/{budget.env_steps} env steps{eta}")
    if todo:
        _log(f"  {len(todo)} run(s) waiting; sweep running {(time.time() - start) / 60:.0f} min")


def _log(message: str) -> None:
    print(f"[learning {time.strftime('%H:%M:%S')}] {message}", flush=True)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", default="Pendulum-v1", help="comma-separated env ids")
    p.add_argument("--systems", default="ours", help=f"comma list of {','.join(SYSTEMS)}")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    p.add_argument("--env_steps", type=int, default=20_000, help="budget per run, warm-up included")
    p.add_argument("--eval_every", type=int, default=1_000, help="env steps between evaluations")
    p.add_argument("--num_eval_episodes", type=int, default=10)
    p.add_argument(
        "--async_eval",
        action="store_true",
        help="ours: the learner does not wait for evaluations (marks are skipped when busy)",
    )
    p.add_argument("--utd", type=float, default=1.0, help="SGD steps per env step (update/data)")
    p.add_argument(
        "--variants",
        default="",
        help=f"ours and sb3loop: name=--flags;name2=--flags, or named ones "
        f"({','.join(NAMED_VARIANTS)})",
    )
    p.add_argument("--common_flags", default="", help="hyperparameter flags for every system")
    p.add_argument("--parallel", type=int, default=1, help="runs at once (one per ~2 cores)")
    p.add_argument("--out", default=DEFAULT_OUT, help="results (small files, commit them)")
    p.add_argument("--work_dir", default="/tmp/sac_learning", help="scratch: checkpoints, replay")
    p.add_argument("--sb3_python", default=DEFAULT_SB3_PYTHON, help="python of `make bench-sb3`")
    p.add_argument("--progress_s", type=float, default=60.0, help="seconds between progress")
    p.add_argument("--report_only", action="store_true", help="rewrite the report, run nothing")
    args = p.parse_args(argv)
    args.envs = [e for e in args.envs.split(",") if e]
    args.systems = [s for s in args.systems.split(",") if s]
    bad = [s for s in args.systems if s not in SYSTEMS]
    if bad:
        p.error(f"--systems: unknown {bad}; choose from {', '.join(SYSTEMS)}.")
    try:
        args.seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        p.error(f"--seeds must be comma-separated integers, got {args.seeds!r}.")
    args.variants = parse_variants(args.variants) or {"preset": ()}
    args.common_flags = tuple(shlex.split(args.common_flags))
    if args.utd <= 0 or args.parallel < 1 or args.eval_every < 1 or args.num_eval_episodes < 1:
        p.error("--utd must be > 0 and --parallel, --eval_every, --num_eval_episodes >= 1.")
    if set(SB3_SYSTEMS) & set(args.systems) and not os.path.exists(args.sb3_python):
        p.error(
            f"--systems includes SB3 but {args.sb3_python} does not exist. Build the SB3 "
            "virtualenv with `make bench-sb3` (torch and tf-agents need different "
            "typing_extensions, so SB3 has its own), or pass --sb3_python."
        )
    _check_budget(p, args)
    _check_variant_flags(p, args)
    return args


def parse_variants(text: str) -> Dict[str, tuple]:
    """'preset,per' or 'name=--flags;name2=' (or both, ';'-separated) -> {name: flags}."""
    parts = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        if "=" in part:
            parts.append(part)
            continue
        for name in filter(None, (n.strip() for n in part.split(","))):
            if name not in NAMED_VARIANTS:
                raise SystemExit(
                    f"--variants: {name!r} is neither name=flags nor one of the named "
                    f"variants ({', '.join(NAMED_VARIANTS)})."
                )
            parts.append(f"{name}={NAMED_VARIANTS[name]}")
    return parse_named_flags(";".join(parts), "--variants")


def _check_budget(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    from sac_distributed.errors import ConfigError

    for env_name in args.envs:
        for variant, flags in args.variants.items():
            try:
                hp = resolved_hparams(env_name, args.common_flags + flags)
            except ConfigError as e:
                p.error(f"{env_name}, variant {variant}: {e}")
            if args.env_steps <= hp.initial_collect_steps:
                p.error(
                    f"--env_steps ({args.env_steps}) must exceed {env_name}'s "
                    f"initial_collect_steps ({hp.initial_collect_steps}); nothing would train."
                )
        _check_peers_can_follow(p, args, env_name)


# Hyperparameters the peers do not implement: they always train with the default
# (SB3 follows those in peer_sb3.SB3_FOLLOWS).
PEER_UNSUPPORTED = (
    "n_step",
    "prioritized_replay",
    "learning_rate_schedule",
    "policy_averaging_tau",
    "normalize_observations",
)


def _check_peers_can_follow(p: argparse.ArgumentParser, args: argparse.Namespace, env_name):
    """Refuses a peer run whose preset uses what the peer would silently leave out."""
    # sb3defaults trains with SB3's own hyperparameters, so it follows none of ours.
    peers = [s for s in args.systems if s not in ("ours", "sb3defaults")]
    if not peers:
        return
    from benchmarks.peer_sb3 import SB3_FOLLOWS, SB3_UNSUPPORTED
    from sac_distributed.config import Hyperparams

    hp = resolved_hparams(env_name, args.common_flags)
    unsupported = [
        (name, [s for s in peers if not (s == "sb3" and name in SB3_FOLLOWS)])
        for name in PEER_UNSUPPORTED
    ]
    if "sb3" in peers:  # the stock loop and the hybrid build our agent and follow these
        unsupported += [(name, ["sb3"]) for name in SB3_UNSUPPORTED]
    for name, refusing in unsupported:
        value, plain = getattr(hp, name), getattr(Hyperparams, name)
        if refusing and value != plain:
            p.error(
                f"{env_name}'s hyperparameters set {name}={value}, which the "
                f"{' and '.join(refusing)} peer(s) do not implement: they would train with "
                f"{name}={plain} and the comparison would not be like for like. Pass "
                f"--common_flags=--{name}={plain} to compare every system that way, or "
                f"run --systems=ours."
            )
    if "sb3loop" in args.systems:
        for variant, flags in args.variants.items():
            hp = resolved_hparams(env_name, args.common_flags + flags)
            for name in PEER_UNSUPPORTED:
                if getattr(hp, name) != getattr(Hyperparams, name):
                    p.error(
                        f"--variants {variant} sets {name}={getattr(hp, name)}, which the "
                        "sb3loop peer does not implement. Run that variant with --systems=ours."
                    )


def _check_variant_flags(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuses a variant flag that a system it applies to cannot follow: the hybrid
    takes hyperparameters and its own options, sac-launch has no hybrid options."""
    named = [(v, f) for v, flags in args.variants.items() for f in flags]
    if not named or not set(args.systems) & {"sb3loop", "ours"}:
        return
    from sac_distributed.config import Hyperparams

    fields = {f.name for f in dataclasses.fields(Hyperparams)}
    own = _hybrid_own_flags()
    for variant, flag in named:
        name = _flag_name(flag)
        is_hparam = name in fields or name.removeprefix("no") in fields
        if "sb3loop" in args.systems and not (is_hparam or name in own):
            p.error(
                f"--variants {variant}: {flag} is neither a hyperparameter nor an option of "
                f"the sb3loop hybrid ({', '.join(own)}), so that system cannot follow it. "
                "Run that variant with --systems=ours."
            )
        if "ours" in args.systems and name in own:
            p.error(
                f"--variants {variant}: --{name} is an option of the sb3loop hybrid, which "
                "sac-launch does not have (its actors' lag is --variable_update_interval). "
                "Run that variant with --systems=sb3loop."
            )


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.report_only:
        learning_report.write_report(args.out)
        return 0
    return sweep(args)


if __name__ == "__main__":
    sys.exit(main())
