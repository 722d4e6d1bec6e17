"""benchmarks/probe.py per_step_cost: its modes, and the XLA-compiled update it measures."""

import json

import pytest

from benchmarks.probes import per_step_cost


def test_an_unknown_mode_is_a_usage_error_naming_the_choices(capsys):
    with pytest.raises(SystemExit) as exit_info:
        per_step_cost.main(["--modes=uniform,jit"])

    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--modes: unknown jit" in err
    assert "uniform, per, per+updates, xla" in err


def test_xla_mode_trains_and_reports_a_rate_beside_uniform(tmp_path):
    out = tmp_path / "cost.json"

    code = per_step_cost.main(
        [
            "--env_name=Pendulum-v1",
            "--modes=xla",  # uniform is added: it is every ratio's base
            "--steps_per_call=5",
            "--calls=1",
            "--rounds=1",
            f"--json={out}",
        ]
    )

    assert code == 0
    result = json.loads(out.read_text())
    assert set(result["median_steps_per_sec"]) == {"uniform", "xla"}
    assert all(rate > 0 for rate in result["median_steps_per_sec"].values())
    assert result["median_ratio_to_uniform"]["uniform"] == 1.0
