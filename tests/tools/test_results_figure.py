"""benchmarks/learning_report.py figure: the README's curves, drawn from the committed results."""

import pytest

from benchmarks.report import figure
from benchmarks.report.figure import Curve, Panel


def test_every_preset_is_drawn_over_at_least_three_seeds(tmp_path):
    path = str(tmp_path / "curves.png")
    seeds = figure.draw(path)

    assert set(seeds) == {p.env_name for p in figure.PANELS}
    for env_name, curves in seeds.items():
        assert curves["ours"] >= 3, (env_name, curves)
        assert all(n >= 3 for n in curves.values()), (env_name, curves)
    import matplotlib.image

    pixels = matplotlib.image.imread(path)[..., :3]
    assert pixels.shape[0] > 400 and pixels.shape[1] > 1000
    assert pixels.std() > 0.05  # drawn on, not a blank canvas


def test_runs_of_another_preset_are_refused():
    # Walker2D's SB3 runs in learning/ trained with its former preset (lr 3e-4,
    # target entropy -3), before the preset took the zoo's values.
    former = Panel("Walker2DBulletEnv-v0", (Curve("SB3", "learning", "sb3-preset"),))

    mismatches = figure.preset_mismatches(figure.RESULTS, [former])

    assert len(mismatches) == 3  # one line per seed
    assert "critic_learning_rate=0.0003 (preset: 0.00073)" in mismatches[0]
    assert "target_entropy=None (preset: -6.0)" in mismatches[0]
    with pytest.raises(ValueError, match="did not train with the preset"):
        figure.draw("/nonexistent/never_written.png", panels=[former])


def test_a_curve_without_runs_is_refused(tmp_path):
    missing = Panel("Pendulum-v1", (Curve("ours", "no_such_sweep", "ours-preset"),))
    path = tmp_path / "curves.png"

    with pytest.raises(ValueError, match="No finished runs for Pendulum-v1 ours-preset under"):
        figure.draw(str(path), panels=[missing])
    assert not path.exists()


def test_the_committed_presets_match_config():
    assert figure.preset_mismatches(figure.RESULTS) == []
