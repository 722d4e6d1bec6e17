"""Time to recover after each server restart, from the ledger and the jobs' logs.

The tool reads the restarted server's counters every POLL_S until its first new
insert and first new sample (`server_recovery` in the ledger); the learner's and
the actors' own log lines after the restart split the wait into its parts:
noticing the loss, waiting for the server to answer (connect backoff),
reconnecting, resuming (a new iterator), the end of the first training call
after it (`trained`: tracing the update again, unless spares were ready), and
the first summary line (which may trace the diagnostics again).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from benchmarks.bench.chaos import kind_of
from benchmarks.bench.chaos_checks import RunRecord

_LEARNER_MARKS = (
    ("noticed", "learner lost the Reverb server"),
    # connect()'s line once a server it had to wait for answers (no line: no wait)
    ("answered", " is up ("),
    ("reconnected", "learner reconnected to the Reverb server"),
    ("resumed", "Learner resumed at train_step"),
    ("trained", "Learner trained again up to train_step"),  # its first call's end
)
# the resumed line's parts: making the new iterator, then publishing the weights
_RESUME_PARTS = re.compile(r"new iterator ([\d.]+) s, weights published ([\d.]+) s")


def recoveries(out_dir: str) -> List[dict]:
    """Per server restart: seconds from the restart to each milestone.

    listening/first_insert/first_sample: the tool's reads of the server's
    counters; the learner's and actors' marks: their log lines after the restart.
    """
    rec = RunRecord(out_dir)
    figures = []
    for r in rec.all("server_recovery"):
        t0 = r["restart_wall"]
        row = {"job": r["job"], "restart_t": round(t0 - rec.run["wall"], 1)}
        if r.get("kill_wall"):  # negative: the kill came this long before the restart
            row["killed"] = round(r["kill_wall"] - t0, 1)
        for key in ("listening", "first_insert", "first_sample"):
            row[key] = None if r.get(key) is None else round(r[key] - t0, 1)
        row.update(_learner_marks(rec, t0, r.get("kill_wall") or t0 - 1))
        row["actors_reconnected"] = _actor_marks(rec, t0)
        figures.append(row)
    return figures


def _learner_marks(rec: RunRecord, t0: float, since: float) -> dict:
    lines = rec.instance_lines("learner", rec.instance_at("learner", t0))
    marks, first_lines = {}, {}
    for key, text in _LEARNER_MARKS:
        found = [
            (s, m) for s, m in lines if s is not None and s >= since and text.lower() in m.lower()
        ]
        marks[key] = round(found[0][0] - t0, 1) if found else None
        first_lines[key] = found[0][1] if found else ""
    marks.update(_resume_parts(first_lines["resumed"]))
    steps = [
        s for s, m in lines if s is not None and s >= t0 and re.search(r"train_step \d+: loss", m)
    ]
    marks["first_train_log"] = round(steps[0] - t0, 1) if steps else None
    return marks


def _resume_parts(line: str) -> Dict[str, Optional[float]]:
    """The seconds the resumed line gives its parts (None: a log from before them)."""
    found = _RESUME_PARTS.search(line)
    return {
        "resume_iterator_s": float(found.group(1)) if found else None,
        "resume_publish_s": float(found.group(2)) if found else None,
    }


def _actor_marks(rec: RunRecord, t0: float) -> Dict[str, Optional[float]]:
    out = {}
    for job in rec.instances:
        if kind_of(job) != "actor":
            continue
        lines = rec.instance_lines(job, rec.instance_at(job, t0))
        found = [s for s, m in lines if s is not None and s >= t0 and "reconnected to the" in m]
        out[job] = round(found[0] - t0, 1) if found else None
    return out
