"""What a chaos run must show, read from its ledger and its jobs' logs.

Each check returns a `Check` (name, passed, one line of detail). The replay
is accounted for in Reverb items on each shard, with the server's own
counters as the authority (an insert is confirmed to an actor only after the
server counted it): a server's insert count is restored from the replay
checkpoint it starts from, so on every restart the transitions lost are
exactly those inserted after that checkpoint; the chain holds when every
restart restored the newest complete checkpoint (and Reverb loaded as many
items as the checkpoint lists), a SIGTERMed server wrote a final checkpoint,
and at the end each shard holds what its last restore held plus what was
inserted since (less FIFO eviction at capacity), which is at least what the
actors that lived wholly after that restart report as confirmed.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from benchmarks.bench.chaos import kind_of, read_ledger
from sac_distributed import paths

# absl's prefix: I1127 14:02:57.123456 pid file:line] message
_ABSL = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+) +\d+ [^\]]*\] (.*)$")
_LOADED = re.compile(r"Table (\S+) and (\d+) items have been successfully loaded")
_STOP_STATS = re.compile(r"Actor (\d+) stopping \(([^)]*)\): ActorStats\((.*)\)$")


@dataclasses.dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


def log_lines(
    path: str, start: int, end: Optional[int] = None
) -> List[Tuple[Optional[float], str]]:
    """(epoch seconds or None, message) for each line of `path` between byte offsets."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read() if end is None else f.read(max(0, end - start))
    except OSError:
        return []
    year = datetime.date.today().year
    lines = []
    for line in data.decode("utf-8", "replace").splitlines():
        match = _ABSL.match(line)
        if not match:
            lines.append((None, line))
            continue
        mo, day, hh, mm, ss, frac, message = match.groups()
        stamp = datetime.datetime(year, int(mo), int(day), int(hh), int(mm), int(ss))
        lines.append((stamp.timestamp() + float("0." + frac), message))
    return lines


class RunRecord:
    """A ledger with each job's incarnations (their log slices) indexed."""

    def __init__(self, out_dir: str):
        self.events = read_ledger(os.path.join(out_dir, "ledger.jsonl"))
        self.run = self.first("run")
        self.root = self.run["root_dir"]
        self.k = self.run.get("transitions_per_item", 1)
        # job -> [(start event, end offset or None)]
        self.instances: Dict[str, List[dict]] = {}
        for event in self.events:
            if event["event"] in ("start", "restart"):
                self.instances.setdefault(event["job"], []).append(event)

    def first(self, name: str) -> dict:
        return next(e for e in self.events if e["event"] == name)

    def all(self, name: str, job: Optional[str] = None) -> List[dict]:
        return [e for e in self.events if e["event"] == name and job in (None, e.get("job"))]

    def log_path(self, job: str) -> str:
        return os.path.join(paths.log_dir(self.root), f"{job}.log")

    def instance_lines(self, job: str, index: int) -> List[Tuple[Optional[float], str]]:
        starts = self.instances[job]
        end = starts[index + 1]["log_offset"] if index + 1 < len(starts) else None
        return log_lines(self.log_path(job), starts[index]["log_offset"], end)

    def instance_at(self, job: str, wall: float) -> int:
        """Index of the incarnation of `job` started last before `wall`."""
        index = 0
        for i, start in enumerate(self.instances.get(job, [])):
            if start["wall"] <= wall:
                index = i
        return index


def _int_after(pattern: str, lines) -> List[Tuple[Optional[float], int]]:
    found = []
    for stamp, message in lines:
        match = re.search(pattern, message)
        if match:
            found.append((stamp, int(match.group(1))))
    return found


# --- the checks ------------------------------------------------------------------------


def check_learner_finished(rec: RunRecord) -> Check:
    target = rec.run["num_iterations"]
    exits = [e for e in rec.all("exit", "learner") if not e.get("killed")]
    last = rec.instance_lines("learner", len(rec.instances["learner"]) - 1)
    said = any(
        f"Learner stopped at train_step {target}: num_iterations reached" in m for _, m in last
    )
    ok = bool(exits) and exits[0]["code"] == 0 and said
    return Check(
        "learner reached num_iterations",
        ok,
        f"learner exit {exits[0]['code'] if exits else 'none'}; logged the end at {target}: {said}",
    )


def check_schedule(rec: RunRecord) -> Check:
    planned = len(rec.run["kills"])
    required = planned if rec.run.get("min_kills") is None else rec.run["min_kills"]
    kills = rec.all("kill")
    crashes, gave_up = rec.all("crash"), rec.all("gave_up")
    covered = sorted({f"{kind_of(k['job'])}:{k['signal']}" for k in kills})
    ok = len(kills) >= required and not crashes and not gave_up
    detail = (
        f"{len(kills)} of {planned} kills (at least {required} required: "
        f"{', '.join(covered)}); {len(crashes)} jobs died unasked"
    )
    if crashes:
        detail += " (" + ", ".join(f"{c['job']} exit {c['code']}" for c in crashes) + ")"
    if gave_up:
        detail += "; the run hit --max_run_s"
    return Check("the kills were done, no job died unasked", ok, detail)


def check_sigterm(rec: RunRecord) -> Check:
    bad = []
    for kill in rec.all("kill"):
        if kill["signal"] != "TERM":
            continue
        exit_ = next((e for e in rec.all("exit", kill["job"]) if e["wall"] >= kill["wall"]), None)
        if exit_ is None or exit_["code"] != 0:
            bad.append(f"{kill['job']} exit {exit_ and exit_['code']}")
    bad += [f"{e['job']} needed SIGKILL" for e in rec.all("escalated")]
    terms = sum(k["signal"] == "TERM" for k in rec.all("kill"))
    return Check(
        "every SIGTERMed job exited 0 in its grace period",
        not bad,
        f"{terms} SIGTERMs" + (f"; {', '.join(bad)}" if bad else ""),
    )


def check_train_steps(rec: RunRecord) -> Tuple[Check, List[str]]:
    """Within an incarnation steps only grow; a new one resumes at the newest checkpoint."""
    problems, notes = [], []
    starts = rec.instances["learner"]
    for i in range(len(starts)):
        lines = rec.instance_lines("learner", i)
        steps = [s for _, s in _int_after(r"train_step (\d+): loss", lines)]
        if any(b < a for a, b in zip(steps, steps[1:])):
            problems.append(f"incarnation {i} logged a step lower than an earlier one")
        if i == 0:
            continue
        restored = _int_after(r"Restored \S+ \(train_step=(\d+)\)", lines)
        resumed = restored[0][1] if restored else 0
        fell_back = any("unreadable" in m or "Fell back" in m for _, m in lines)
        info = next(e for e in rec.all("restart_info", "learner") if e["wall"] >= starts[i]["wall"])
        on_disk = info.get("learner_checkpoint") or 0
        kill = _kill_before(rec, "learner", starts[i]["wall"])
        before = kill.get("learner_step_logged") if kill else None
        prev = rec.instance_lines("learner", i - 1)
        stopped = _int_after(r"Learner stopped at train_step (\d+): stop signal", prev)
        if resumed < on_disk and not fell_back:
            problems.append(f"restart {i} resumed at {resumed}, below checkpoint {on_disk}")
        if kill and kill["signal"] == "TERM" and (not stopped or stopped[-1][1] != resumed):
            problems.append(
                f"restart {i} after SIGTERM resumed at {resumed}, stopped at "
                f"{stopped[-1][1] if stopped else 'no stop line'}"
            )
        notes.append(
            f"learner {kill['signal'] if kill else 'crash'} at logged step {before}: "
            f"newest checkpoint {on_disk}, resumed at {resumed}"
        )
    ok = not problems
    detail = (
        "; ".join(problems)
        if problems
        else f"{len(starts) - 1} learner restarts, none went back past its checkpoint"
    )
    return Check("train steps never went back past the last checkpoint", ok, detail), notes


def _kill_before(rec: RunRecord, job: str, wall: float) -> Optional[dict]:
    kills = [k for k in rec.all("kill", job) if k["wall"] <= wall]
    return kills[-1] if kills else None


def _shard_jobs(rec: RunRecord) -> List[str]:
    return [j for j in rec.run["jobs"] if kind_of(j) == "server"]


def check_replay_chain(rec: RunRecord) -> Tuple[Check, List[str]]:
    """Every server restart restored the newest complete checkpoint, and all of it."""
    from sac_distributed.replay.signatures import REPLAY_TABLE

    problems, notes = [], []
    for shard, job in enumerate(_shard_jobs(rec)):
        starts = rec.instances[job]
        for i in range(1, len(starts)):
            info = next(e for e in rec.all("restart_info", job) if e["wall"] >= starts[i]["wall"])
            expected, counts = info.get("restore_expected"), info.get("restore_expected_counts")
            lines = rec.instance_lines(job, i)
            restored = [
                m.split("Replay restored from ", 1)[1].rstrip(".")
                for _, m in lines
                if "Replay restored from " in m
            ]
            loaded = [
                int(m.group(2))
                for _, line in lines
                for m in [_LOADED.search(line)]
                if m and m.group(1) == REPLAY_TABLE
            ]
            kill = _kill_before(rec, job, starts[i]["wall"])
            what = f"{job} restart {i} ({kill['signal'] if kill else 'crash'})"
            if expected is None:
                if restored:
                    problems.append(f"{what}: restored {restored[0]} where none was expected")
                continue
            if not restored or os.path.basename(restored[0]) != os.path.basename(expected):
                problems.append(
                    f"{what}: restored {restored[:1] or 'nothing'}, the newest "
                    f"complete checkpoint was {expected}"
                )
                continue
            if counts is None or (loaded and loaded[0] != counts["items"]):
                problems.append(
                    f"{what}: Reverb loaded {loaded[:1]} items, checkpoint lists "
                    f"{counts and counts['items']}"
                )
                continue
            last_seen = _last_inserts_before_exit(rec, shard, job, kill)
            lost = None if last_seen is None else max(0, last_seen - counts["inserts"])
            if kill and kill["signal"] == "TERM" and not _wrote_final(rec, job, i - 1, kill):
                problems.append(f"{what}: no replay checkpoint written after SIGTERM")
            when = (
                "its final checkpoint, before it exited"
                if kill and kill["signal"] == "TERM"
                else "that checkpoint"
            )
            notes.append(
                f"{what}: restored {counts['items']} items (inserts {counts['inserts']}); "
                f"lost >= {lost} items inserted after {when}"
            )
    ok = not problems
    detail = (
        "; ".join(problems) if problems else "every restart restored the newest complete checkpoint"
    )
    return Check(
        "replay losses explained by a kill between a write and a checkpoint", ok, detail
    ), notes


def _last_inserts_before_exit(rec, shard, job, kill) -> Optional[int]:
    if kill is None:
        return None
    exit_ = next((e for e in rec.all("exit", job) if e["wall"] >= kill["wall"]), None)
    end = exit_["wall"] if exit_ else kill["wall"]
    seen = [
        c["shards"][shard]["inserts"]
        for c in rec.all("counts")
        if c["wall"] <= end and c["shards"][shard] is not None
    ]
    if kill["counts"][shard] is not None:
        seen.append(kill["counts"][shard]["inserts"])
    return max(seen) if seen else None


def _wrote_final(rec: RunRecord, job: str, index: int, kill: dict) -> bool:
    return any(
        "Replay checkpoint written to" in m and (stamp or 0) >= kill["wall"] - 1
        for stamp, m in rec.instance_lines(job, index)
    )


def actor_stops(rec: RunRecord) -> List[dict]:
    """Each actor incarnation's stop line: its start, end and confirmed counts per shard."""
    stops = []
    for job, starts in rec.instances.items():
        if kind_of(job) != "actor":
            continue
        for i, start in enumerate(starts):
            for stamp, message in rec.instance_lines(job, i):
                match = _STOP_STATS.search(message)
                if not match:
                    continue
                fields = match.group(3)
                per_shard = re.search(r"transitions_written_per_shard=\{([^}]*)\}", fields)
                shards = {}
                for pair in per_shard.group(1).split(",") if per_shard else []:
                    if ":" in pair:
                        key, value = pair.split(":")
                        shards[int(key)] = int(value)
                stops.append(
                    dict(
                        job=job,
                        start=start["wall"],
                        end=stamp,
                        reason=match.group(2),
                        written=int(re.search(r"transitions_written=(\d+)", fields).group(1)),
                        unconfirmed=int(
                            re.search(r"transitions_unconfirmed=(\d+)", fields).group(1)
                        ),
                        per_shard=shards,
                    )
                )
    return stops


def check_final_replay(rec: RunRecord) -> Tuple[Check, List[str]]:
    """After its last restart each shard holds the restore plus every insert since."""
    problems, notes = [], []
    final = rec.all("final_counts")
    if not final:
        return Check(
            "the replay after the last restart holds all it should",
            False,
            "no final counts (the run did not reach its end)",
        ), notes
    stops = actor_stops(rec)
    for shard, job in enumerate(_shard_jobs(rec)):
        counts = final[-1]["shards"][shard]
        if counts is None:
            problems.append(f"{job} did not answer at the end")
            continue
        infos = rec.all("restart_info", job)
        base = (infos[-1].get("restore_expected_counts") if infos else None) or {
            "items": 0,
            "inserts": 0,
        }
        since_wall = infos[-1]["wall"] if infos else rec.run["wall"]
        inserted = counts["inserts"] - base["inserts"]
        expected = min(counts["max_size"], base["items"] + inserted)
        confirmed = sum(s["per_shard"].get(shard, 0) for s in stops if s["start"] >= since_wall)
        confirmed_items = confirmed // rec.k
        whole = sum(1 for s in stops if s["start"] >= since_wall)
        if counts["size"] != expected:
            problems.append(
                f"{job} holds {counts['size']} items, restore {base['items']} + "
                f"{inserted} inserted since = {expected}"
            )
        if confirmed_items > inserted:
            problems.append(
                f"{job}: actors confirmed {confirmed_items} items since the restart, "
                f"the server counted {inserted} inserts"
            )
        notes.append(
            f"{job}: holds {counts['size']} items = last restore {base['items']} + {inserted} "
            f"inserted since (capacity {counts['max_size']}); {whole} actor incarnations that "
            f"started after it confirmed {confirmed} transitions ({confirmed_items} items)"
        )
    ok = not problems
    detail = "; ".join(problems) if problems else "; ".join(notes)
    return Check("the replay after the last restart holds all it should", ok, detail), notes


def check_policy(rec: RunRecord) -> Check:
    """The exported greedy policy loads, is of the last train step, and acts on the env
    the run recorded in its run_info.json (as sac-evaluate finds it)."""
    target = rec.run["num_iterations"]
    try:
        from sac_distributed.tools import inspect_policy

        policy_dir = paths.policy_dir(rec.root, "greedy_policy")
        policy = inspect_policy.load_policy(policy_dir)
        step = int(policy.get_train_step())
        env_name, load_env = inspect_policy.run_env(policy_dir)
        action = policy.action(load_env(seed=0).reset()).action
    except Exception as error:  # noqa: BLE001  (any failure to load is the finding)
        return Check("the exported greedy policy loads", False, f"{type(error).__name__}: {error}")
    return Check(
        "the exported greedy policy loads",
        step == target,
        f"train_step {step} (want {target}), {env_name} action {action.tolist()}",
    )


def _eval_points(root_dir: str) -> list:
    """The run's evaluations (results.csv rows); none while it has no readable file."""
    from sac_distributed import results

    try:
        return results.read_results(paths.results_path(root_dir))
    except Exception:  # noqa: BLE001
        return []


def final_return(root_dir: str) -> Tuple[Optional[int], Optional[float]]:
    points = _eval_points(root_dir)
    return (points[-1].train_step, points[-1].average_return) if points else (None, None)


# The late return: the mean greedy return of the evaluations in the last tenth of a run.
# One 10-episode evaluation is too noisy to compare runs by: on the Pendulum-v1 preset
# an undisturbed run's last three read -218.5, -96.6 and -125.8.
LATE_FRACTION = 0.1


def late_return(root_dir: str, num_iterations: int) -> Optional[float]:
    """Mean greedy return of the evaluations at train_step >= 90% of num_iterations."""
    start = (1.0 - LATE_FRACTION) * num_iterations
    late = [p.average_return for p in _eval_points(root_dir) if p.train_step >= start]
    return sum(late) / len(late) if late else None


def check_return(
    rec: RunRecord,
    baseline: Optional[float],
    tolerance: Optional[float],
    undisturbed: Sequence[float] = (),
) -> Check:
    """The chaos run reached num_iterations with a final greedy return near the
    undisturbed run's (|difference| <= tolerance), and a late return (`late_return`) no
    worse than the worst of the undisturbed seeds' late returns in `undisturbed` (a
    better one than every one of them passes)."""
    target = rec.run["num_iterations"]
    step, value = final_return(rec.root)
    if value is None:
        return Check("final greedy return", False, "no results.csv row")
    detail = f"{value:.1f} at train_step {step}"
    ok = step == target
    if baseline is not None:
        detail += f"; undisturbed run {baseline:.1f}, difference {value - baseline:+.1f}"
        if tolerance is not None:
            ok = ok and abs(value - baseline) <= tolerance
            detail += f" (tolerance {tolerance})"
    if undisturbed:
        late = late_return(rec.root, target)
        low, high = min(undisturbed), max(undisturbed)
        ok = ok and late is not None and late >= low
        where = "below" if late is None or late < low else "above" if late > high else "within"
        late_text = "none" if late is None else f"{late:.1f}"
        detail += (
            f"; mean of the last {LATE_FRACTION:.0%} of evaluations {late_text}, {where} "
            f"the {len(undisturbed)} undisturbed seeds' {low:.1f} to {high:.1f}"
        )
    return Check("final greedy return", ok, detail)


def run_checks(
    out_dir: str,
    baseline: Optional[float] = None,
    tolerance: Optional[float] = None,
    undisturbed: Sequence[float] = (),
) -> Tuple[List[Check], List[str]]:
    rec = RunRecord(out_dir)
    steps, step_notes = check_train_steps(rec)
    chain, chain_notes = check_replay_chain(rec)
    final, _ = check_final_replay(rec)
    checks = [
        check_learner_finished(rec),
        check_schedule(rec),
        check_sigterm(rec),
        steps,
        chain,
        final,
        check_policy(rec),
        check_return(rec, baseline, tolerance, undisturbed),
    ]
    return checks, step_notes + chain_notes


def format_checks(checks: Sequence[Check]) -> str:
    return "\n".join(f"{'PASS' if c.passed else 'FAIL'}  {c.name}: {c.detail}" for c in checks)
