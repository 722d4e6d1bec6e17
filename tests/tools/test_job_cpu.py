"""benchmarks/probe.py job_cpu: which job a process is, and the per-job sums."""

import pytest

from benchmarks.probes import job_cpu


def test_processes_are_named_by_their_job_module():
    python = "/venv/bin/python"
    assert job_cpu.job_name([python, "-u", "-m", "sac_distributed.bin.learner", "--x=1"]) == (
        "learner"
    )
    assert job_cpu.job_name([python, "-m", "sac_distributed.bin.actor", "--task=3"]) == "actor3"
    assert job_cpu.job_name([python, "-m", "sac_distributed.bin.reverb_server"]) == (
        "reverb_server"
    )
    # The launcher itself, and anything else below it, is not a job.
    assert job_cpu.job_name(["/venv/bin/sac-launch", "--root_dir=/r"]) is None


def test_each_process_counts_once_with_its_last_reading():
    readings = {11: ("actor0", 2.5), 12: ("actor1", 1.0), 13: ("learner", 7.25)}
    readings[11] = ("actor0", 3.5)  # a later reading of the same process replaces it
    readings[14] = ("learner", 0.5)  # a restarted learner: a second process, added
    assert job_cpu.cpu_by_job(readings) == {"actor0": 3.5, "actor1": 1.0, "learner": 7.75}


def test_without_the_flag_separator_it_says_how_to_call_it():
    with pytest.raises(SystemExit, match="-- <sac-launch flags>"):
        job_cpu.main(["--out=x.json"])
