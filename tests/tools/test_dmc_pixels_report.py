"""benchmarks/report/dmc_pixels.py on the committed DMC pixel results."""

import statistics

from benchmarks.report import dmc_pixels


def test_drq_rows_without_repeated_seeds_give_the_papers_100k_table():
    drq = dmc_pixels.drq_curves()
    assert len(drq["cheetah_run"]) == 8 and len(drq["walker_walk"]) == 9
    for task, frames, mean, sd in (
        ("cheetah_run", 96_000, 344.6, 68.0),
        ("walker_walk", 100_000, 612.5, 164.5),
    ):
        at, values = dmc_pixels.drq_at(drq[task], frames)
        assert at == frames
        assert abs(statistics.mean(values) - mean) < 0.1
        assert abs(statistics.stdev(values) - sd) < 0.1


def test_our_runs_are_read_in_frames_and_compared(tmp_path):
    ours = dmc_pixels.our_curves()
    frames, value = ours[("cheetah_run", 0)][-1]
    assert frames == 4 * 23639 and value > 300
    (line,) = [s for s in dmc_pixels.summary_lines() if s.startswith("cheetah_run seed 0")]
    assert "DrQ at 96k: median 331 [237, 443] over 8 seeds" in line
    assert dmc_pixels.figure(str(tmp_path / "curves.png")).endswith("curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 10_000
