"""benchmarks/probe.py crossq_cost: one row per (algorithm, width), written as CSV and JSON."""

import csv
import json

from benchmarks.probes import crossq_cost


def test_it_times_both_learners_at_each_width_and_writes_the_table(tmp_path):
    out = str(tmp_path / "cost")
    code = crossq_cost.main(
        [
            "--env_name=Pendulum-v1",
            "--widths=8,16",
            "--steps_per_call=3",
            "--calls=1",
            "--rounds=1",
            "--clock=cpu",
            f"--out={out}",
        ]
    )
    assert code == 0
    with open(out + ".csv") as f:
        rows = list(csv.DictReader(f))
    pairs = {(r["algorithm"], int(r["critic_width"])) for r in rows}
    assert pairs == {("sac", 8), ("crossq", 8), ("sac", 16), ("crossq", 16)}
    assert all(float(r["median_steps_per_sec"]) > 0 for r in rows)
    base = next(r for r in rows if (r["algorithm"], r["critic_width"]) == ("sac", "8"))
    assert float(base["ratio_to_base"]) == 1.0
    with open(out + ".json") as f:
        result = json.load(f)
    assert result["base"] == "sac-8" and result["batch_size"] == 128
    assert len(result["rows"]) == 4
