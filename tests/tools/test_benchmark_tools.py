"""benchmarks/: each entry script answers --help as a file, probe.py and learning_report.py
dispatch every mode, and a tiny probe runs against a real Reverb server process."""

import json
import os
import subprocess
import sys

import pytest
from support.repo import BENCHMARKS_DIR, EXAMPLES_DIR

from benchmarks import learning_report, probe

ENTRY_SCRIPTS = [
    "chaos.py",
    "compare.py",
    "learning.py",
    "learning_report.py",
    "peer_sb3.py",
    "peer_sb3_pixels.py",
    "peer_sb3loop.py",
    "peer_stock.py",
    "probe.py",
]
SB3_PYTHON = os.path.join(BENCHMARKS_DIR, ".venv-sb3", "bin", "python")


def _run_python(*argv: str, python: str = sys.executable, timeout: int = 600):
    # From another directory: the scripts must not rely on the current one.
    return subprocess.run([python, *argv], capture_output=True, text=True, timeout=timeout, cwd="/")


def test_the_entry_scripts_are_the_documented_nine():
    entries = sorted(
        f
        for f in os.listdir(BENCHMARKS_DIR)
        if f.endswith(".py")
        and 'if __name__ == "__main__":' in open(os.path.join(BENCHMARKS_DIR, f)).read()
    )
    assert entries == ENTRY_SCRIPTS
    with open(os.path.join(BENCHMARKS_DIR, "README.md")) as f:
        readme = f.read()
    for script in ENTRY_SCRIPTS:
        assert f"`{script}" in readme, script


@pytest.mark.parametrize("script", ENTRY_SCRIPTS)
def test_each_entry_script_answers_help_when_run_as_a_file(script):
    done = _run_python(os.path.join(BENCHMARKS_DIR, script), "--help")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "usage:" in done.stdout


@pytest.mark.parametrize("mode", sorted(set(probe.MODES) - {"update_parity_sb3"}))
def test_every_probe_mode_answers_help(mode, capsys):
    with pytest.raises(SystemExit) as stopped:
        probe.main([mode, "--help"])
    assert stopped.value.code == 0
    assert f"usage: probe.py {mode}" in capsys.readouterr().out


@pytest.mark.skipif(not os.path.exists(SB3_PYTHON), reason="needs make bench-sb3")
def test_the_sb3_side_of_update_parity_answers_help_under_the_sb3_virtualenv():
    done = _run_python(
        os.path.join(BENCHMARKS_DIR, "probe.py"),
        "update_parity_sb3",
        "--help",
        python=SB3_PYTHON,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--inputs" in done.stdout


def test_probe_lists_its_modes_and_refuses_an_unknown_one(capsys):
    assert probe.main([]) == 2
    listed = capsys.readouterr().out
    assert all(mode in listed for mode in probe.MODES)
    assert probe.main(["no_such_mode"]) == 2
    assert "unknown mode 'no_such_mode'" in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(learning_report.COMMANDS))
def test_every_learning_report_command_answers_help(command, capsys):
    with pytest.raises(SystemExit) as stopped:
        learning_report.main([command, "--help"])
    assert stopped.value.code == 0
    assert f"usage: learning_report.py {command}" in capsys.readouterr().out


def test_a_tiny_pull_cost_probe_times_a_real_server(tmp_path):
    out = tmp_path / "pull.json"
    done = _run_python(
        os.path.join(BENCHMARKS_DIR, "probe.py"),
        "pull_cost",
        "--env_name=Pendulum-v1",
        "--calls=3",
        f"--out={out}",
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result == json.loads(done.stdout[done.stdout.index("{") :])
    assert result["env_name"] == "Pendulum-v1" and result["calls"] == 3
    assert result["weight_bytes"] > 0  # the policy weights it pushed and pulled
    for call in ("server_info", "table_counts", "pull_unchanged", "push_and_pull"):
        assert result[call]["wall_ms"] > 0 and result[call]["cpu_ms"] >= 0, result


def test_learning_report_checks_the_committed_tables_when_run_as_a_file():
    done = _run_python(os.path.join(BENCHMARKS_DIR, "learning_report.py"), "tables", "--check")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.skipif(not os.path.exists(SB3_PYTHON), reason="needs make bench-sb3")
def test_a_tiny_sb3_peer_run_writes_the_evaluators_format(tmp_path):
    out = tmp_path / "out"
    done = _run_python(
        os.path.join(BENCHMARKS_DIR, "learning.py"),
        "--envs=Pendulum-v1",
        "--systems=sb3",
        "--seeds=0",
        "--env_steps=700",
        "--eval_every=200",
        "--num_eval_episodes=1",
        "--common_flags=--initial_collect_steps=300 --batch_size=32",
        f"--out={out}",
        f"--work_dir={tmp_path / 'work'}",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = out / "runs" / "Pendulum-v1" / "sb3-preset" / "seed0"
    assert json.loads((run / "run.json").read_text())["status"] == "done"
    rows = (run / "results.csv").read_text().splitlines()
    steps = [int(r.split(",")[1]) for r in rows[1:]]
    assert steps and steps[-1] >= 600 and steps == sorted(steps), rows


def test_pixel_replay_probe_returns_the_frames_written_in_both_layouts(tmp_path):
    """A real server: the probe checks every sampled transition's frames against the
    written ones (it exits non-zero on a mismatch); tiny frames keep it cheap. Its
    memory figures are measurements and go in benchmarks/results, not here."""
    out = tmp_path / "bytes.json"
    done = _run_python(
        os.path.join(BENCHMARKS_DIR, "probe.py"),
        "pixel_replay_bytes",
        "--size=16",
        "--transitions=240",
        "--episode_length=50",
        "--per_item=2",
        "--check_samples=40",
        f"--out={out}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    pairs, frames = result["layouts"]["pairs"], result["layouts"]["frames"]
    assert pairs["transitions"] == frames["transitions"] == 240
    assert (pairs["items"], frames["items"]) == (240, 120)
    assert pairs["transitions_checked"] == 40 and frames["transitions_checked"] == 80


def test_pixel_update_probe_times_every_action_path_and_both_update_modes(tmp_path):
    """The probe's NumPy conv actor must give TensorFlow's greedy action (it exits
    non-zero where they differ); its timings are measurements and go in
    benchmarks/results, not here."""
    out = tmp_path / "cost"
    done = _run_python(
        os.path.join(BENCHMARKS_DIR, "probe.py"),
        "pixel_update_cost",
        "--batch_sizes=2",
        "--updates=1",
        "--actions=1",
        "--rounds=1",
        f"--out={out}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads((tmp_path / "cost.json").read_text())["rows"]
    paths = {r["path"] for r in rows if r["kind"] == "action"}
    assert paths == {"eager", "tf.function", "tf.function+xla", "numpy_im2col"}
    assert {(r["batch_size"], r["xla"]) for r in rows if r["kind"] == "update"} == {
        (2, False),
        (2, True),
    }
    assert all(r["per_s"] > 0 for r in rows if r["kind"] == "update")
    gap = [r for r in rows if r["kind"] == "action_check"][0]["numpy_max_abs_gap"]
    assert gap <= 1e-4


def test_pixel_actor_probe_measures_the_actor_loop_with_the_conv_policy(tmp_path):
    """The probe exits non-zero if the actor ran without weights (random warm-up)."""
    out = tmp_path / "rate.json"
    done = _run_python(
        os.path.join(BENCHMARKS_DIR, "probe.py"),
        "pixel_actor_rate",
        "--seconds=1",
        "--rounds=1",
        f"--module_dir={EXAMPLES_DIR}",
        f"--out={out}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["observation_shape"] == [32, 32, 9]
    assert result["actor_env_steps_per_s"] > 0 and result["raw_env_steps_per_s"] > 0
