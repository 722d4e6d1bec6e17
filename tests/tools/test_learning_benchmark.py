"""benchmarks/learning.py: the plumbing and the table, on a tiny sweep (not returns).

The tiny sweep trains Pendulum-v1 for a thousand SGD steps with our real
binaries (sac-launch) and the stock tutorial loop, one seed each, then checks
the layout of OUT, the report's tables and curves, and that a second invocation
resumes (runs nothing); a sweep stopped by SIGTERM stops sac-launch and its jobs
and records nothing; bad input is refused before anything runs.

The sweeps that should finish and the refusals run learning.py's CLI in this
process (`learning.main`), where TensorFlow is already imported; the runs a sweep
starts are the real processes either way. The SIGTERM test runs learning.py as a
script, its own process, to signal it.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from support import learning_cli
from support.processes import DEADLINE_S, processes_mentioning, read, wait_for_log
from support.repo import BENCHMARKS_DIR

from benchmarks import learning, learning_report
from benchmarks.bench.sac_launch import parse_named_flags
from benchmarks.bench.timing import median_time
from benchmarks.learning_report import Point
from benchmarks.peer_common import RESULTS_HEADER
from sac_distributed import config as config_lib
from sac_distributed.paths import RESULTS_HEADER as EVALUATOR_HEADER

TINY_COMMON_FLAGS = "--common_flags=--initial_collect_steps=300 --batch_size=32"
TINY_ENV_STEPS = 1300  # 1000 SGD steps: one learner summary (every 1000), at the last step
TINY = [
    "--envs=Pendulum-v1",
    "--seeds=0",
    f"--env_steps={TINY_ENV_STEPS}",
    "--eval_every=200",
    "--num_eval_episodes=1",
    TINY_COMMON_FLAGS,
    "--progress_s=5",
]
# One seed per system: the median/min/max over seeds are unit-tested above, so two
# runs (not four) check the plumbing, and the suite stays within its time budget.
# Generous: two runs of TensorFlow start-up and a few hundred SGD steps, on a busy machine.
SWEEP_TIMEOUT_S = 1800


def _points(*pairs, start_wall: float = 100.0):
    return [
        Point(train_step=i * 10, env_steps=s, average_return=r, wall_time=start_wall + i)
        for i, (s, r) in enumerate(pairs)
    ]


def test_peers_write_the_evaluators_results_format():
    assert RESULTS_HEADER == EVALUATOR_HEADER


def test_sb3_torch_threads_come_from_the_environment_and_bad_values_are_refused():
    from benchmarks import peer_sb3  # torch is imported inside main(), so this needs no SB3 venv

    assert peer_sb3.torch_threads("1") == 1
    assert peer_sb3.torch_threads("2") == 2
    for bad in ("0", "-1", "two", ""):
        with pytest.raises(SystemExit, match="SAC_BENCH_TORCH_THREADS"):
            peer_sb3.torch_threads(bad)


def test_sb3_refuses_critic_options_its_sac_does_not_have():
    import dataclasses

    from benchmarks import peer_sb3
    from sac_distributed.config import Hyperparams

    plain = dataclasses.asdict(Hyperparams())
    assert peer_sb3.agent_kwargs(plain, action_dim=1)["batch_size"] == plain["batch_size"]
    for name, value in (("critic_loss", "huber"), ("critic_layer_norm", True)):
        with pytest.raises(SystemExit, match=f"SB3 SAC cannot train with {name}={value}"):
            peer_sb3.agent_kwargs({**plain, name: value}, action_dim=1)


def test_sb3_follows_n_step_returns():
    import dataclasses

    from benchmarks import peer_sb3
    from sac_distributed.config import Hyperparams

    plain = dataclasses.asdict(Hyperparams())
    assert peer_sb3.agent_kwargs(plain, action_dim=1)["n_steps"] == 1
    assert peer_sb3.agent_kwargs({**plain, "n_step": 3}, action_dim=1)["n_steps"] == 3


def test_sb3_with_its_own_defaults_gets_none_of_ours():
    """The sb3defaults system: `SAC("MlpPolicy", env)` as a user writes it, with only the
    update ratio ours; the preset's hyperparameters are not passed on."""
    import dataclasses

    from benchmarks import peer_sb3
    from sac_distributed.config import Hyperparams

    plain = dataclasses.asdict(Hyperparams())
    own = peer_sb3.sb3_model_kwargs(plain, action_dim=1, own_defaults=True, utd=1.0)
    assert own == {"train_freq": 1, "gradient_steps": 1}
    mapped = peer_sb3.sb3_model_kwargs(plain, action_dim=1, own_defaults=False, utd=1.0)
    assert mapped["learning_starts"] == plain["initial_collect_steps"]
    budget = learning.Budget(
        env_steps=10_000, eval_every=1_000, num_eval_episodes=10, utd=1.0, common_flags=()
    )
    spec = learning.RunSpec("InvertedPendulum-v5", "sb3defaults", "preset", (), 0)
    argv = learning.command(spec, budget, "/tmp/unused", "/sb3/python")
    assert argv[0] == "/sb3/python" and argv[2].endswith("peer_sb3.py")
    assert argv[-1] == "--own_defaults"


def test_named_flag_sets_and_the_median_time_to_a_target():
    sets = parse_named_flags("base=; n3=--n_step=3 --seed=1;", "--sets")
    assert sets == {"base": (), "n3": ("--n_step=3", "--seed=1")}
    with pytest.raises(SystemExit, match="--sets: 'a b=--x' is not name=flags"):
        parse_named_flags("a b=--x", "--sets")
    assert median_time([3.0, None, 1.0]) == 3.0  # a miss counts as the slowest
    assert median_time([None, None, 1.0]) is None  # most runs missed


def test_return_at_interpolates_and_tolerates_a_short_last_eval():
    points = _points((1000, 0.0), (2000, 100.0), (2990, 50.0))
    assert learning_report.return_at(points, 1500) == pytest.approx(50.0)
    assert learning_report.return_at(points, 2000) == pytest.approx(100.0)
    assert learning_report.return_at(points, 3000) == pytest.approx(50.0)  # within 5%
    assert learning_report.return_at(points, 500) is None
    assert learning_report.return_at(points, 4000) is None


def test_mean_return_averages_the_window_and_needs_all_of_it():
    points = _points((10_000, 0.0), (20_000, 100.0), (30_000, 400.0))
    # at 10k, 15k (interpolated: 50), 20k, 25k (250), 30k
    assert learning_report.mean_return(points, 10_000, 30_000, 5_000) == pytest.approx(160.0)
    assert learning_report.mean_return(points, 20_000, 20_000, 5_000) == pytest.approx(100.0)
    assert learning_report.mean_return(points, 20_000, 50_000, 5_000) is None  # ends at 30k
    with pytest.raises(ValueError, match="every > 0"):
        learning_report.mean_return(points, 10_000, 30_000, 0)


def _write_seed_results(runs_dir, group: str, seed: int, pairs) -> None:
    path = runs_dir / group / f"seed{seed}"
    path.mkdir(parents=True)
    rows = [",".join(EVALUATOR_HEADER)]
    for i, (steps, ret) in enumerate(pairs):
        row = {"train_step": i, "env_steps": steps, "average_return": ret}
        rows.append(",".join(str(row.get(name, 1.0)) for name in EVALUATOR_HEADER))
    (path / "results.csv").write_text("\n".join(rows) + "\n")


def test_mean_return_cli_merges_a_group_across_sweeps_and_refuses_bad_input(tmp_path, capsys):
    from benchmarks.report import mean_return

    first, second = tmp_path / "a", tmp_path / "b"
    _write_seed_results(first, "ours-preset", 0, [(20_000, 100), (30_000, 300)])
    _write_seed_results(second, "ours-preset", 1, [(20_000, 200), (30_000, 200)])
    _write_seed_results(second, "ours-preset", 2, [(20_000, 50)])  # too short for the window
    argv = [f"--runs={first}", f"--runs={second}", "--groups=ours-preset,sb3-preset"]
    assert mean_return.main(argv + ["--window=20000,30000,10000"]) == 0
    out = capsys.readouterr().out
    assert "ours-preset: 200 [200, 200] over 2 seeds (0: 200, 1: 200)" in out
    assert "too short for the window: seeds [2]" in out
    assert "sb3-preset: no seed covers the window" in out
    _write_seed_results(first, "sb3-preset", 0, [(20_000, 300), (30_000, 300)])
    assert mean_return.main(argv + ["--window=20000,30000,10000", "--versus=sb3-preset"]) == 0
    out = capsys.readouterr().out
    assert "ours-preset vs sb3-preset: 0 of 2 pairs favour ours-preset" in out
    assert "(one-sided Mann-Whitney p = 1)" in out
    with pytest.raises(SystemExit):
        mean_return.main(argv + ["--versus=stock-preset"])
    assert "--versus=stock-preset is not one of --groups" in capsys.readouterr().err
    (first / "sb3-preset" / "seed0" / "results.csv").unlink()
    _write_seed_results(second, "ours-preset", 0, [(20_000, 1), (30_000, 1)])
    with pytest.raises(SystemExit, match="seed 0 is in more than one --runs directory"):
        mean_return.main(argv)
    for bad, message in (
        (["--window=20000,10000,5000"], "stop >= start"),
        (["--window=a,b"], "three integers"),
    ):
        with pytest.raises(SystemExit):
            mean_return.main(argv + bad)
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mean_return.main([f"--runs={tmp_path / 'missing'}", "--groups=x"])
    assert "is not a directory" in capsys.readouterr().err


def test_the_exact_mann_whitney_tail_counts_every_ordering():
    import itertools
    import math

    from benchmarks.report import mean_return

    assert mean_return.pairs_favouring([3, 5], [1, 3, 4]) == 4.5  # 3 > 1, 3 = 3, 5 > all
    # Brute force over every way 3 xs and 4 ys can interleave (ranks 0..6).
    counts = {}
    for xs in itertools.combinations(range(7), 3):
        ys = [r for r in range(7) if r not in xs]
        u = mean_return.pairs_favouring(xs, ys)
        counts[u] = counts.get(u, 0) + 1
    for xs in itertools.combinations(range(7), 3):
        ys = [r for r in range(7) if r not in xs]
        observed = mean_return.pairs_favouring(xs, ys)
        tail = sum(c for u, c in counts.items() if u >= observed) / math.comb(7, 3)
        assert mean_return.one_sided_p(xs, ys) == pytest.approx(tail), xs
    # Six seeds against six: 29 of 36 pairs is the least with p <= 0.05.
    six = [float(i) for i in range(6)]
    at_29, at_28 = [0.5, 3.5] + [5.5] * 4, [0.5, 2.5] + [5.5] * 4
    assert mean_return.pairs_favouring(at_29, six) == 29
    assert mean_return.one_sided_p(at_29, six) == pytest.approx(0.0465, abs=1e-4)
    assert mean_return.one_sided_p(at_28, six) == pytest.approx(0.0660, abs=1e-4)


def test_training_returns_merge_actors_by_time_and_average_the_last_ten(tmp_path):
    from sac_distributed.results import EpisodeLog

    for task, rows in {0: [(100, 1.0), (300, 3.0)], 1: [(150, 2.0)]}.items():
        log = EpisodeLog(str(tmp_path / learning_report.episodes_file(task)))
        for steps, episode_return in rows:
            log.append(steps, episode_return, 100)
            time.sleep(0.11)  # wall times one decimal apart: actor 0, 1, then 0 again
        log.close()
    episodes = learning_report.read_training_episodes(str(tmp_path))
    # Actor 0 logs at t, t+0.11; actor 1 at t+0.22: ordered by wall time,
    # the totals are each actor's latest count summed.
    assert episodes == [(100, 1.0), (300, 3.0), (450, 2.0)]

    assert learning_report.train_return_at(episodes, 99) is None
    assert learning_report.train_return_at(episodes, 300) == pytest.approx(2.0)
    many = [(10 * (i + 1), float(i)) for i in range(30)]
    assert learning_report.train_return_at(many, 300) == pytest.approx(24.5)  # episodes 20-29


def test_learner_scalars_become_one_csv_row_per_step_and_a_restart_overwrites(tmp_path):
    import csv

    import tensorflow as tf

    summaries = str(tmp_path / "train")
    for run, steps in enumerate(((1000, 2000), (2000, 3000))):  # the second: a restart
        writer = tf.summary.create_file_writer(summaries, filename_suffix=f".run{run}")
        with writer.as_default():
            for step in steps:
                tf.summary.scalar("learner/alpha", 0.1 * step / 1000 + run, step=step)
                if step != 3000:
                    tf.summary.scalar("learner/q_value", step / 10, step=step)
        writer.close()
    path = str(tmp_path / "learner.csv")

    assert learning.export_learner_scalars(summaries, path) == 3
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["train_step", "learner/alpha", "learner/q_value"]
    assert [r["train_step"] for r in rows] == ["1000", "2000", "3000"]
    assert float(rows[0]["learner/alpha"]) == pytest.approx(0.1)
    assert float(rows[1]["learner/alpha"]) == pytest.approx(1.2)  # the restart's value
    assert rows[2]["learner/q_value"] == ""  # not summarized at that step
    assert learning.export_learner_scalars(str(tmp_path / "none"), str(tmp_path / "x")) == 0
    assert not os.path.exists(tmp_path / "x")


def test_instability_is_three_evals_below_half_the_gain():
    rises = [(i * 1000, r) for i, r in enumerate([0, 400, 800, 700, 600, 900])]
    assert not learning_report.is_unstable(_points(*rises))
    collapse = [(i * 1000, r) for i, r in enumerate([0, 400, 800, 300, 200, 100, 900])]
    assert learning_report.is_unstable(_points(*collapse))
    two_dips = [(i * 1000, r) for i, r in enumerate([0, 800, 300, 200, 800, 100, 350, 700])]
    assert not learning_report.is_unstable(_points(*two_dips))
    # Negative returns (Pendulum): the gain is measured from the first eval.
    pendulum = [(i * 1000, r) for i, r in enumerate([-1500, -200, -900, -1000, -1200])]
    assert learning_report.is_unstable(_points(*pendulum))


def test_holds_needs_80_percent_of_later_evals_at_900():
    reach = [(i, r) for i, r in enumerate([200, 1000, 1000, 950, 800, 1000, 1000])]
    assert learning_report.holds(_points(*reach), 1000, 900, 0.8) is True
    falls = [(i, r) for i, r in enumerate([200, 1000, 260, 106, 86, 1000])]
    assert learning_report.holds(_points(*falls), 1000, 900, 0.8) is False
    assert learning_report.holds(_points((0, 10), (1, 999)), 1000, 900, 0.8) is None
    # Reached only at the last evaluation: nothing after it to judge, so no verdict.
    last_only = _points((0, 10), (1, 990), (2, 1000))
    assert learning_report.holds(last_only, 1000, 900, 0.8) is None


def test_hold_status_names_each_case_for_the_table():
    def status(*returns):
        return learning_report.hold_status(
            _points(*enumerate(returns)), reach=1000, level=900, share=0.8
        )

    assert status(200, 1000, 1000, 950) == "yes"
    assert status(200, 1000, 260, 106) == "NO"
    assert status(10, 999) == "never"
    assert status(10, 990, 1000) == "last-eval-only"


def test_minitaur_rows_keep_decimals_and_name_the_tutorial_as_reference():
    def run(seed, final):
        points = _points((10_000, -0.35), (60_000, -0.01), (110_000, final))
        return learning_report.Run(
            "MinitaurBulletEnv-v0", "ours-preset", seed, 100.0, points, 110_000
        )

    table = learning_report.markdown(learning_report.summarize([run(0, 0.354), run(1, 0.5)]))
    assert "| TF-Agents tutorial reference |  |" in table
    assert "| -0.28 |" in table  # the reference at 110k env steps (100k train steps)
    assert "0.43 [0.35, 0.50]" in table  # the median and range over seeds, with decimals


@pytest.mark.slow
def test_tiny_sweep_writes_the_table_and_curves_then_resumes(tmp_path, capsys):
    out, work = str(tmp_path / "out"), str(tmp_path / "work")
    args = [*TINY, "--systems=ours,stock", f"--out={out}"]
    first = learning_cli.sweep(capsys, *args, work_dir=work, timeout_s=SWEEP_TIMEOUT_S)  # exit 0
    assert "2 runs planned, 0 already done, 2 to run" in first

    for group in ("ours-preset", "stock-preset"):
        for seed in (0,):
            run_dir = os.path.join(out, "runs", "Pendulum-v1", group, f"seed{seed}")
            with open(os.path.join(run_dir, "run.json")) as f:
                record = json.load(f)
            assert record["status"] == "done" and record["env_steps_budget"] == TINY_ENV_STEPS
            points = learning_report.read_points(os.path.join(run_dir, "results.csv"))
            assert len(points) >= 2, f"{group} seed {seed}: {points}"
            assert points[-1].env_steps >= 0.95 * TINY_ENV_STEPS, (
                f"{group} seed {seed}: {points[-1]}"
            )
            episodes = learning_report.read_training_episodes(run_dir)
            ends = [steps for steps, _ in episodes]
            assert len(episodes) >= 3 and ends == sorted(ends), f"{group}: {episodes}"
            assert all(-2000 < r < 0 for _, r in episodes), episodes
            if group == "ours-preset":  # Pendulum's episodes are 200 steps
                assert ends[:4] == [200, 400, 600, 800], episodes
                with open(os.path.join(run_dir, "learner.csv")) as f:
                    header = f.readline().strip().split(",")
                assert header[0] == "train_step" and "learner/alpha" in header, header
            # (The stock loop's collect driver resets the env after the warm-up,
            # so its second episode ends later.)
    assert not os.path.exists(os.path.join(work, "Pendulum-v1", "ours-preset", "seed0")), (
        "a finished run's scratch directory (checkpoints, replay) is deleted"
    )

    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)["Pendulum-v1"]
    assert set(summary) == {"ours-preset", "stock-preset"}
    mark = str(TINY_ENV_STEPS)
    for group in summary.values():
        assert group["seeds"] == [0]
        final = group["marks"][mark]["return"]
        assert final["n"] == 1 and final["min"] == final["median"] == final["max"]
        assert group["marks"][mark]["train_return"]["n"] == 1
        assert group["sgd_steps_per_s"]["median"] > 0
        assert group["marks"][mark]["seconds"]["median"] > 0
        assert group["reached_target"] in (0, 1)
    table = open(os.path.join(out, "summary.md")).read()
    assert "| ours-preset | 0 |" in table and "| stock-preset | 0 |" in table
    assert "return @1.3k" in table and "s to -200" in table and "train @1.3k" in table
    with open(os.path.join(out, "Pendulum-v1.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"

    second = learning_cli.sweep(capsys, *args, work_dir=work, timeout_s=600)  # exit 0
    assert "2 runs planned, 2 already done, 0 to run" in second
    assert "start " not in second


@pytest.mark.slow
def test_sigterm_stops_the_runs_in_progress_and_records_none(tmp_path):
    out, work = str(tmp_path / "out"), str(tmp_path / "work")
    long_run = [a for a in TINY if not a.startswith("--env_steps=")] + ["--env_steps=500000"]
    log_path = str(tmp_path / "sweep.log")
    with open(log_path, "w") as log:
        sweep = subprocess.Popen(
            [sys.executable, os.path.join(BENCHMARKS_DIR, "learning.py"), *long_run,
             "--systems=ours", f"--out={out}", f"--work_dir={work}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        # The evaluator's first row: server, actor, learner and evaluator are all up.
        eval_dir = os.path.join(work, "Pendulum-v1", "ours-preset", "seed0", "root", "eval")
        results = os.path.join(eval_dir, "results.csv")
        wait_for_log(results, r"\n0,", DEADLINE_S, {"the sweep": sweep})
        jobs = processes_mentioning(work)
        assert len(jobs) >= 5, f"sac-launch and its four jobs: {jobs}"
        sweep.send_signal(signal.SIGTERM)
        assert sweep.wait(timeout=DEADLINE_S) == 130, read(log_path)[-3000:]
    finally:
        if sweep.poll() is None:
            sweep.kill()
    said = read(log_path)
    assert "SIGTERM: stopped 1 run(s) in progress, not recorded" in said, said[-3000:]
    left = [pid for pid in jobs if os.path.exists(f"/proc/{pid}")]
    assert not left and not processes_mentioning(work), f"still running: {left}"
    assert not os.path.exists(os.path.join(out, "runs")), "an interrupted run is not recorded"


def test_bad_input_is_refused_before_anything_runs(tmp_path, capsys):
    out = str(tmp_path / "out")
    missing = learning_cli.refused(
        capsys, *TINY, "--systems=sb3", f"--sb3_python={tmp_path}/none", f"--out={out}"
    )
    assert "make bench-sb3" in missing

    short = learning_cli.refused(capsys, "--envs=Pendulum-v1", "--env_steps=500", f"--out={out}")
    assert "must exceed Pendulum-v1's initial_collect_steps (1000)" in short

    unlike = learning_cli.refused(
        capsys, *TINY, "--systems=ours,stock", f"{TINY_COMMON_FLAGS} --n_step=3", f"--out={out}"
    )
    assert "set n_step=3, which the stock peer(s) do not implement" in unlike
    assert "--common_flags=--n_step=1" in unlike
    decaying = learning_cli.refused(
        capsys,
        *TINY,
        "--systems=ours,stock",  # not sb3: a fresh clone has no SB3 virtualenv
        f"{TINY_COMMON_FLAGS} --learning_rate_schedule=linear",
        f"--out={out}",
    )
    assert "set learning_rate_schedule=linear, which the stock peer(s)" in decaying
    assert "--common_flags=--learning_rate_schedule=constant" in decaying
    averaging = learning_cli.refused(
        capsys,
        *TINY,
        "--systems=ours,stock",
        f"{TINY_COMMON_FLAGS} --policy_averaging_tau=0.005",
        f"--out={out}",
    )
    assert "set policy_averaging_tau=0.005, which the stock peer(s)" in averaging
    assert "--common_flags=--policy_averaging_tau=0.0" in averaging

    # The stock loop builds our agent and follows a Huber critic loss; SB3 cannot.
    # (Any existing file passes the --sb3_python check; nothing runs.)
    huber = f"{TINY_COMMON_FLAGS} --critic_loss=huber"
    sb3 = ["--systems=ours,stock,sb3", f"--sb3_python={sys.executable}"]
    huber_sb3 = learning_cli.refused(capsys, *TINY, *sb3, huber, f"--out={out}")
    assert "set critic_loss=huber, which the sb3 peer(s) do not implement" in huber_sb3
    assert "--common_flags=--critic_loss=squared" in huber_sb3
    # SB3's SAC follows n-step returns (n_steps); the stock loop does not.
    n3 = learning_cli.refused(
        capsys, *TINY, *sb3, f"{TINY_COMMON_FLAGS} --n_step=3", f"--out={out}"
    )
    assert "set n_step=3, which the stock peer(s) do not implement" in n3

    bad = learning_cli.refused(capsys, *TINY, "--variants=x=--batch_size=-1", f"--out={out}")
    assert "batch_size must be a positive integer" in bad
    assert not os.path.exists(os.path.join(out, "runs"))


@pytest.mark.parametrize("env_name", ["Pendulum-v1", "MountainCarContinuous-v0"])
def test_a_runs_warm_up_and_updates_add_up_to_the_budget(env_name):
    """With or without a preset: the run's own warm-up default (a tenth of
    num_iterations without one) must not replace the warm-up the budget counted."""
    budget = learning.Budget(
        env_steps=20_000, eval_every=2_000, num_eval_episodes=1, utd=1.0, common_flags=()
    )
    spec = learning.RunSpec(env_name, "ours", "preset", (), 0)
    hp = learning.resolved_hparams(env_name, ())
    argv = learning._ours_command(spec, budget, hp, "/tmp/unused")
    launched = learning.resolved_hparams(env_name, [a for a in argv if a.startswith("--")][1:])
    assert launched.initial_collect_steps + launched.num_iterations == budget.env_steps


def test_a_run_stopped_from_outside_short_of_its_budget_is_not_done(tmp_path):
    """sac-launch stopped by a SIGTERM exits 0 after a clean stop: its run must not
    count as finished (the report leaves it out, the next sweep runs it again)."""
    budget = learning.Budget(
        env_steps=100_000, eval_every=5_000, num_eval_episodes=1, utd=1.0, common_flags=()
    )
    results = tmp_path / "results.csv"
    assert learning.run_status(0, str(results), 101_600, budget) == "failed"  # no results
    results.write_text("train_step,env_steps,average_return\n")
    assert learning.run_status(0, str(results), 101_600, budget) == "done"
    assert learning.run_status(0, str(results), 95_000, budget) == "done"
    assert learning.run_status(0, str(results), 46_544, budget) == "short"
    assert learning.run_status(1, str(results), 101_600, budget) == "failed"


def test_a_variant_names_crossq_ablations_and_layer_sizes_in_one_list_syntax():
    """Both list-valued hyperparameters take comma lists: sizes as ints, ablations as names."""
    hp = learning.resolved_hparams(
        "Pendulum-v1",
        [
            "--algorithm=crossq",
            "--crossq_ablations=separate_passes,no_policy_delay",
            "--critic_joint_fc_layer_params=32,16",
        ],
    )
    assert hp.crossq_ablations == ("separate_passes", "no_policy_delay")
    assert hp.critic_joint_fc_layer_params == (32, 16)


# What a learning run sets beyond the preset: its length and its evaluation schedule
# (wait_for_eval: the learner waits for each evaluation, so it lands at its step).
RUN_SCHEDULE = ("num_iterations", "eval_interval", "num_eval_episodes", "wait_for_eval")


@pytest.mark.parametrize("env_name", sorted(config_lib.PRESETS))
def test_a_published_run_passes_no_hyperparameter_its_preset_does_not_hold(env_name):
    """`sac-launch --env_name=X` alone trains as X's README row did: every flag that
    learning.py gives a preset run, but the run's length and evaluations, is the
    preset's own value (one SGD step per env step included)."""
    budget = learning.Budget(
        env_steps=100_000, eval_every=5_000, num_eval_episodes=10, utd=1.0, common_flags=()
    )
    spec = learning.RunSpec(env_name, "ours", "preset", (), 0)
    preset = learning.resolved_hparams(env_name, ())
    argv = learning._ours_command(spec, budget, preset, "/tmp/unused")
    passed = learning.flags_to_overrides([a for a in argv[1:] if a.startswith("--")])
    assert preset.samples_per_insert == preset.batch_size
    for name, value in passed.items():
        if name not in RUN_SCHEDULE:
            assert value == getattr(preset, name), f"--{name}={value}: the preset has another"


def test_a_run_at_another_update_ratio_says_so_with_its_flag():
    budget = learning.Budget(
        env_steps=20_000, eval_every=2_000, num_eval_episodes=1, utd=0.5, common_flags=()
    )
    spec = learning.RunSpec("HalfCheetah-v5", "ours", "preset", (), 0)
    hp = learning.resolved_hparams("HalfCheetah-v5", ())
    argv = learning._ours_command(spec, budget, hp, "/tmp/unused")
    assert "--samples_per_insert=128.0" in argv
