"""A short seeded chaos run (benchmarks/chaos.py): the server, the learner and an actor
killed with SIGKILL and SIGTERM while a real run trains; every check must pass, and a
ledger that hides a loss must fail them."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from support.processes import DEADLINE_S
from support.repo import BENCHMARKS_DIR

pytestmark = pytest.mark.slow

CHAOS = os.path.join(BENCHMARKS_DIR, "chaos.py")
# Long enough that the learner, back within a few seconds of a kill, is still training
# when the last kill is due: 1000 steps finished before it once its reconnects got faster.
NUM_ITERATIONS = 2000
TINY = {
    "initial_collect_steps": 100,
    "batch_size": 32,
    "actor_fc_layer_params": [16, 16],
    "critic_joint_fc_layer_params": [16, 16],
    "eval_interval": 500,
    "num_eval_episodes": 1,
    # One export at the end (the checks load the final one), besides the SIGTERMed
    # learner's own: each costs seconds of CPU.
    "policy_save_interval": NUM_ITERATIONS,
}
# The server and the learner each get both signals; the actor is killed last, so that
# the actor that replaces it lives wholly after the last server restart and its
# confirmed transitions are checked against the server's inserts.
KILLS = "server:KILL,learner:TERM,server:TERM,learner:KILL,actor:KILL"


def _chaos(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, CHAOS, *flags],
        capture_output=True,
        text=True,
        timeout=3 * DEADLINE_S,
        stdin=subprocess.DEVNULL,
    )


def _checks(out: str) -> dict:
    with open(os.path.join(out, "summary.json")) as f:
        return {c["name"]: c for c in json.load(f)["checks"]}


@pytest.fixture(scope="module")
def chaos_run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("chaos"))
    done = _chaos(
        f"--out={out}",
        "--env_name=Pendulum-v1",
        "--seed=3",
        "--num_actors=1",
        f"--num_iterations={NUM_ITERATIONS}",
        f"--hparams={json.dumps(TINY)}",
        f"--kills={KILLS}",
        "--step_span=0.05,0.4",
        "--interval_s=0.5,2",
        "--restart_delay_s=0.5,2",
        "--replay_checkpoint_interval_s=3",
        f"--max_run_s={2 * DEADLINE_S}",
    )
    return out, done


def test_chaos_run_passes_every_check(chaos_run):
    out, done = chaos_run
    report = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, report
    checks = _checks(out)
    assert checks and all(c["passed"] for c in checks.values()), report
    with open(os.path.join(out, "ledger.jsonl")) as f:
        events = [json.loads(line) for line in f]
    kills = [e for e in events if e["event"] == "kill"]
    kinds = {(e["job"].split("_")[0], e["signal"]) for e in kills}
    assert {
        ("server", "KILL"),
        ("server", "TERM"),
        ("learner", "KILL"),
        ("learner", "TERM"),
    } <= kinds
    assert ("actor", "KILL") in kinds
    restarts = [e for e in events if e["event"] == "restart"]
    assert sorted(e["job"] for e in restarts) == sorted(e["job"] for e in kills)
    # Every server restart was followed by the learner's and the actors' return.
    recoveries = json.load(open(os.path.join(out, "summary.json")))["recoveries"]
    assert len(recoveries) == 2
    assert all(r["first_sample"] is not None and r["first_insert"] is not None for r in recoveries)
    # A learner that resumed says what its resume took: the new iterator, then the weights.
    for r in recoveries:
        if r["resumed"] is not None:
            assert r["resume_iterator_s"] is not None and r["resume_publish_s"] is not None, r


def _tamper_and_check(out: str, tmp_path, edit) -> subprocess.CompletedProcess:
    """Copies the run's ledger beside its root_dir, edits it, and checks it again."""
    copy = str(tmp_path / "copy")
    os.makedirs(copy)
    with open(os.path.join(out, "ledger.jsonl")) as f:
        events = [json.loads(line) for line in f]
    edit(events)
    with open(os.path.join(copy, "ledger.jsonl"), "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in events)
    shutil.copy(os.path.join(out, "summary.json"), copy)
    return _chaos(f"--out={copy}", "--check_only")


def test_a_hidden_loss_fails_the_checks(chaos_run, tmp_path):
    """The same run, its ledger saying the final replay should hold one more item, and a
    server restart that should have restored a newer checkpoint: both checks fail."""
    out, done = chaos_run
    assert done.returncode == 0

    def edit(events):
        final = [e for e in events if e["event"] == "final_counts"][-1]
        final["shards"][0]["inserts"] += 1  # an insert the replay does not hold
        info = [e for e in events if e["event"] == "restart_info" and e["job"] == "server"][0]
        info["restore_expected"] += "-a-newer-one"

    checked = _tamper_and_check(out, tmp_path, edit)
    assert checked.returncode == 1, checked.stdout[-4000:]
    checks = _checks(str(tmp_path / "copy"))
    assert not checks["the replay after the last restart holds all it should"]["passed"]
    assert not checks["replay losses explained by a kill between a write and a checkpoint"][
        "passed"
    ]
    assert "FAILED" in checked.stdout


def test_the_policy_check_plays_the_env_the_run_recorded(chaos_run, tmp_path):
    """--check_only takes the env from the run's run_info.json, not from --env_name: a
    HalfCheetahBullet run's policy once failed the check against the default Pendulum-v1."""
    from benchmarks import chaos as chaos_tool

    out, done = chaos_run
    assert done.returncode == 0
    copy = tmp_path / "copy"
    os.makedirs(copy)
    for name in ("ledger.jsonl", "summary.json"):
        shutil.copy(os.path.join(out, name), copy)
    assert chaos_tool.main([f"--out={copy}", "--check_only", "--env_name=Ant-v5"]) == 0
    check = _checks(str(copy))["the exported greedy policy loads"]
    assert check["passed"] and "Pendulum-v1 action" in check["detail"], check


def _undisturbed(out: str, folder, name: str, late_return: float) -> None:
    """An undisturbed run's folder in `folder`: the chaos run's results.csv with every
    return set to `late_return`."""
    from sac_distributed import paths

    target = paths.results_path(str(folder / name / "root"))
    os.makedirs(os.path.dirname(target))
    with open(paths.results_path(os.path.join(out, "root"))) as f:
        header, *rows = f.read().splitlines()
    for i, row in enumerate(rows):
        cells = row.split(",")
        cells[2] = str(late_return)  # average_return
        rows[i] = ",".join(cells)
    with open(target, "w") as f:
        f.write("\n".join([header, *rows]) + "\n")


def test_the_late_return_is_checked_against_the_undisturbed_seeds(chaos_run, tmp_path):
    """The undisturbed_* folders of other seeds give the seed spread of the late return
    (the mean of the last tenth of evaluations): a chaos run below every undisturbed
    seed's fails the check, one within it passes."""
    from benchmarks import chaos as chaos_tool
    from benchmarks.bench import chaos_checks

    out, done = chaos_run
    assert done.returncode == 0
    record = chaos_checks.RunRecord(out)
    late = chaos_checks.late_return(record.root, NUM_ITERATIONS)
    assert late is not None
    _undisturbed(out, tmp_path, "undisturbed_seed7", late + 10.0)
    _undisturbed(out, tmp_path, "undisturbed_seed8", late + 500.0)
    spread = chaos_tool.undisturbed_returns(str(tmp_path), None, NUM_ITERATIONS)
    assert spread == pytest.approx(
        {"undisturbed_seed7": late + 10.0, "undisturbed_seed8": late + 500.0}
    )
    below = chaos_checks.check_return(record, None, None, list(spread.values()))
    assert not below.passed and "below the 2 undisturbed seeds'" in below.detail, below

    _undisturbed(out, tmp_path, "undisturbed_seed9", late - 10.0)
    spread = chaos_tool.undisturbed_returns(str(tmp_path), None, NUM_ITERATIONS)
    within = chaos_checks.check_return(record, None, None, list(spread.values()))
    assert within.passed and "within the 3 undisturbed seeds'" in within.detail, within
    named = chaos_tool.undisturbed_returns(
        str(tmp_path), str(tmp_path / "undisturbed_seed9"), NUM_ITERATIONS
    )
    assert named == pytest.approx({"undisturbed_seed9": late - 10.0})


def test_an_unfinished_undisturbed_run_is_left_out_or_refused_when_named(chaos_run, tmp_path):
    """An undisturbed_* run still going (no late evaluations yet) is left out of the
    spread with a line; named with --undisturbed, it is an error that says so."""
    from benchmarks import chaos as chaos_tool

    out, _ = chaos_run
    _undisturbed(out, tmp_path, "undisturbed_seed5", -100.0)
    os.makedirs(tmp_path / "undisturbed_seed6" / "root")  # started, nothing evaluated yet
    assert chaos_tool.undisturbed_returns(str(tmp_path), None, NUM_ITERATIONS) == {
        "undisturbed_seed5": -100.0
    }
    with pytest.raises(SystemExit, match="undisturbed_seed6/root: is that run finished"):
        chaos_tool.undisturbed_returns(str(tmp_path), str(tmp_path / "undisturbed_seed6"), 1000)


def test_a_job_that_stopped_because_the_run_finished_did_not_die_unasked(tmp_path):
    """Actors and the evaluator stop once the learner publishes its done flag, while the
    learner still saves and exits: their exit 0 is the run's end when their own log says
    so (the suite's chaos run once counted such exits as deaths on a loaded machine), and
    only the incarnation's own part of the log counts."""
    import types

    from benchmarks.bench import chaos_run

    log = tmp_path / "actor_0.log"
    log.write_text("I1128 actor.py] Actor 0 stopping (learner finished): ActorStats(...)\n")
    offset = log.stat().st_size
    with open(log, "a") as f:
        f.write("I1128 actor.py] Actor 0: replay holds 120 of 100 transitions\n")
    earlier = types.SimpleNamespace(log_path=str(log), log_offset=0)
    restarted = types.SimpleNamespace(log_path=str(log), log_offset=offset)
    assert chaos_run._says_the_run_finished(earlier)
    assert not chaos_run._says_the_run_finished(restarted)
    with open(log, "a") as f:
        f.write("I1128 evaluation.py] Learner finished at train_step 1000; evaluator done.\n")
    assert chaos_run._says_the_run_finished(restarted)
