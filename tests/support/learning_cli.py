"""benchmarks/learning.py's CLI run in the pytest worker, where TensorFlow is already
imported: a sweep (its runs are still real processes) and a refusal."""

import threading

import pytest

from benchmarks import learning
from support.processes import kill_processes_mentioning


def sweep(capsys, *args: str, work_dir: str, timeout_s: float) -> str:
    """learning.py's sweep in this process; its stdout. Past `timeout_s` the runs
    (every process that names `work_dir`) are killed, so a hang fails the sweep."""
    deadline = threading.Timer(timeout_s, kill_processes_mentioning, (work_dir,))
    deadline.start()
    try:
        code = learning.main([*args, f"--work_dir={work_dir}"])
    finally:
        deadline.cancel()
    captured = capsys.readouterr()
    assert code == 0, captured.out[-4000:] + captured.err[-4000:]
    return captured.out


def refused(capsys, *args: str) -> str:
    """learning.py's CLI in this process, refusing `args` with exit 2 before anything
    runs; what it wrote to stderr."""
    with pytest.raises(SystemExit) as refusal:
        learning.main(list(args))
    assert refusal.value.code == 2, refusal.value.code
    return capsys.readouterr().err
