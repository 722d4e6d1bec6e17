"""benchmarks/probe.py startup_timeline: reading the jobs' absl logs into a timeline."""

import datetime

from benchmarks.probes import startup_timeline


def test_an_absl_line_gives_its_time_and_message():
    line = "I1126 14:02:57.250000 140580468624256 jobs.py:179] Learner strategy: default."

    stamp, message = startup_timeline.parse_line(line, 2026)

    assert stamp == datetime.datetime(2026, 11, 26, 14, 2, 57, 250000).timestamp()
    assert message == "Learner strategy: default."
    assert startup_timeline.parse_line("pybullet build time: Jan 29 2025", 2026) is None


def test_the_timeline_keeps_each_jobs_first_lines_and_milestones(tmp_path):
    start = datetime.datetime(2026, 11, 26, 14, 0, 0).timestamp()
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "learner.log").write_text(
        "pybullet build time: Jan 29 2025 23:17:20\n"
        "I1126 14:00:07.500000 1 jobs.py:1] Learner strategy: default with 1 replica(s).\n"
        "I1126 14:00:08.000000 1 a.py:1] line two\n"
        "I1126 14:00:08.100000 1 a.py:1] line three\n"
        "I1126 14:00:09.000000 1 a.py:1] nothing to see\n"
        "I1126 14:00:11.700000 1 a.py:1] train_step 1000: loss 1.0, 337.7 steps/s\n"
    )
    (logs / "server.log").write_text(
        "I1126 14:00:03.000000 1 s.py:1] Reverb server for Pendulum-v1 listening on port 1\n"
    )

    lines = startup_timeline.timeline(str(tmp_path), start)

    assert lines == [
        "== learner.log",
        "    7.50 s  Learner strategy: default with 1 replica(s).",
        "    8.00 s  line two",
        "    8.10 s  line three",
        "   11.70 s  train_step 1000: loss 1.0, 337.7 steps/s",
        "== server.log",
        "    3.00 s  Reverb server for Pendulum-v1 listening on port 1",
    ]
