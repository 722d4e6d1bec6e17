"""benchmarks/report/dmc_pixels.py on the committed DMC pixel results."""

import statistics

import pytest

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


def test_a_peer_run_is_read_apart_from_ours(tmp_path):
    header = "train_step,env_steps,average_return,average_episode_length,wall_time\n"
    for name, rows in (
        ("cheetah_run_seed3", "0,1000,5.0,250,1\n2500,3500,120.0,250,2\n"),
        ("sb3_cheetah_run_seed3", "0,1000,4.0,250,1\n2500,3500,60.0,250,2\n"),
        ("sb3_cheetah_run_seed4", ""),  # no results.csv: skipped
    ):
        (tmp_path / name).mkdir()
        if rows:
            (tmp_path / name / "results.csv").write_text(header + rows)
    assert dmc_pixels.our_curves(str(tmp_path)) == {
        ("cheetah_run", 3): [(4000, 5.0), (14000, 120.0)]
    }
    assert dmc_pixels.peer_curves(str(tmp_path)) == {
        ("cheetah_run", 3): [(4000, 4.0), (14000, 60.0)]
    }


def test_the_median_over_seeds_takes_each_seeds_last_evaluation():
    curves = {
        ("walker_walk", 0): [(4000, 900.0), (92_300, 371.0)],
        ("walker_walk", 1): [(92_300, 381.0)],
        ("walker_walk", 2): [(92_300, 500.0)],
        ("cheetah_run", 0): [(94_600, 429.0)],
        ("cheetah_run", 1): [(94_500, 427.0)],
    }
    assert dmc_pixels.seed_medians(curves) == {
        "cheetah_run": (2, 428.0, 94_500, 94_600),
        "walker_walk": (3, 381.0, 92_300, 92_300),
    }
    lines = dmc_pixels.summary_lines()
    assert any(s.startswith("walker_walk: median ") for s in lines)


def test_the_pixel_peer_refuses_a_run_that_would_train_nothing(capsys):
    from benchmarks import peer_sb3_pixels

    with pytest.raises(SystemExit):
        peer_sb3_pixels.parse_args(["--seed=0", "--steps=500", "--results=r.csv"])
    assert "--steps (500) must exceed --learning_starts (1000)" in capsys.readouterr().err
    args = peer_sb3_pixels.parse_args(["--seed=0", "--results=r.csv"])
    assert (args.steps, args.batch_size, args.action_repeat, args.frame_stack) == (
        25_000,
        128,
        4,
        3,
    )


def test_drqv2_rows_give_the_figures_the_issue_quotes():
    drqv2 = dmc_pixels.drqv2_curves()
    for task, mean in (("cheetah_run", 273.2), ("walker_walk", 169.6)):
        assert len(drqv2[task]) == 10
        at, values = dmc_pixels.drq_at(drqv2[task], 94_600)
        assert at == 100_000 and abs(statistics.mean(values) - mean) < 0.1
    (line,) = [s for s in dmc_pixels.summary_lines() if s.startswith("cheetah_run seed 0")]
    assert line.endswith("DrQ-v2 at 100k: mean 273, median 263 over 10 seeds")


def test_a_peer_run_is_set_beside_ours_at_the_same_frames_and_wall_time():
    ours = {
        ("cheetah_run", 0): [(0.0, 420, 1.0), (600.0, 10_420, 150.0), (1200.0, 20_420, 300.0)],
        ("cheetah_run", 1): [(0.0, 420, 2.0), (900.0, 10_420, 200.0)],
        ("walker_walk", 0): [(0.0, 210, 3.0)],
    }
    peer = {("cheetah_run", 0): [(0.0, 4000, 0.5), (1000.0, 12_000, 90.0)]}
    (line,) = dmc_pixels.peer_lines(ours, peer)
    assert line == (
        "SB3 CnnPolicy cheetah_run seed 0: 90 at 12.0k frames after 0.28 h; "
        "ours nearest the same frames: seed 0 150 at 10.4k frames, seed 1 200 at 10.4k frames; "
        "ours within the same wall time: seed 0 150 at 10.4k frames, seed 1 200 at 10.4k frames"
    )
    peer = {("walker_walk", 0): [(0.0, 100, 0.5)]}
    (line,) = dmc_pixels.peer_lines({("cheetah_run", 0): ours[("cheetah_run", 0)]}, peer)
    assert line.endswith("ours nearest the same frames: none; ours within the same wall time: none")
    # Nearest in frames, either side: 34.0k is set beside 34.4k, not the 24.4k before it.
    ours = {("cheetah_run", 2): [(0.0, 420, 0.0), (10.0, 24_440, 78.0), (20.0, 34_448, 137.0)]}
    peer = {("cheetah_run", 0): [(0.0, 4000, 0.3), (5.0, 34_000, 151.0)]}
    (line,) = dmc_pixels.peer_lines(ours, peer)
    assert "ours nearest the same frames: seed 2 137 at 34.4k frames;" in line
    assert line.endswith("ours within the same wall time: seed 2 0 at 0.4k frames")


def test_timed_curves_count_seconds_from_the_first_evaluation(tmp_path):
    header = "train_step,env_steps,average_return,average_episode_length,wall_time\n"
    (tmp_path / "sb3_walker_walk_seed1").mkdir()
    (tmp_path / "sb3_walker_walk_seed1" / "results.csv").write_text(
        header + "0,1000,4.0,500,100.5\n1250,2250,60.0,500,1300.5\n"
    )
    assert dmc_pixels.timed_curves(str(tmp_path), dmc_pixels.PEER_PREFIX) == {
        ("walker_walk", 1): [(0.0, 2000, 4.0), (1200.0, 4500, 60.0)]
    }
    assert dmc_pixels.timed_curves(str(tmp_path)) == {}
