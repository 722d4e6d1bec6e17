"""sac-status: table sizes, insert/sample rates and learner progress of a running job,
or a run's files (finished or not).

    sac-status --server=localhost:8008                      # refresh every 2 s until Ctrl-C
    sac-status --server=localhost:8008 --once --root_dir=/tmp/sac
    sac-status --server=host0:8008,host1:8008               # replay shards, in shard order
    sac-status --root_dir=sac_runs/Pendulum-v1-20261123-101500   # a run's files, no server

Without --server, --root_dir shows what the run's files hold: its env and
network sizes (run_info.json), learner checkpoints, evaluations (first, last,
best), exported policies, replay checkpoints and the actors' training episodes.

Rates are measured between two reads --interval seconds apart, so --once waits
that long before it prints. With --root_dir it also reports "actors seen": the
number of distinct collect/actor_<task> TensorBoard directories under
root_dir, i.e. actor task indices that ever ran there (not a live count;
replicas sharing a --task share one directory). An unreachable server is an
error (exit 2) after --connect_timeout seconds (10 here); once running, the
display says so and keeps retrying. With several replay shards each is shown on
its own line (a shard that does not answer as DOWN), with the totals above; it
is an error only when no shard answers.
"""

import sys

from absl import flags

from sac_distributed import config as config_lib
from sac_distributed import paths
from sac_distributed.bin import _common
from sac_distributed.errors import ServerUnreachableError
from sac_distributed.runtime import StopSignal
from sac_distributed.tools import run_summary
from sac_distributed.tools.status import StatusMonitor, format_status

flags.DEFINE_string(
    "server",
    None,
    "host:port of the Reverb server (sac-reverb-server); several, comma-separated, for a "
    "sharded replay (in shard order: the first also holds the variable container). "
    "Unset: --root_dir alone shows that run's files.",
)
flags.DEFINE_float("interval", 2.0, "Seconds between reads (and between refreshes).")
flags.DEFINE_boolean("once", False, "Print one snapshot (two reads for the rates) and exit.")
FLAGS = flags.FLAGS
FLAGS.set_default("connect_timeout", 10.0)

_CLEAR_SCREEN = "\033[H\033[J"


def _show(text: str) -> None:
    refresh = sys.stdout.isatty() and not FLAGS.once
    print((_CLEAR_SCREEN if refresh else "") + text + ("" if refresh else "\n"), flush=True)


def main() -> int:
    if not FLAGS.server:
        return _show_run_files()
    for address in FLAGS.server.split(","):
        config_lib.validate_address("server", address.strip())
    if not FLAGS.interval > 0:
        raise config_lib.ConfigError(f"--interval must be > 0, got {FLAGS.interval}.")
    stop = StopSignal().install()
    monitor = StatusMonitor(FLAGS.server, FLAGS.connect_timeout, FLAGS.root_dir, stop)
    monitor.poll()  # the first read only sets the baseline for the rates
    while not stop.wait(FLAGS.interval):
        try:
            _show(format_status(monitor.poll(), FLAGS.server))
        except ServerUnreachableError as e:
            if FLAGS.once:
                raise
            _show(f"Reverb server {FLAGS.server}: unreachable, retrying ({e})")
        if FLAGS.once:
            break
    return 0


def _show_run_files() -> int:
    if not FLAGS.root_dir:
        raise config_lib.ConfigError(
            "sac-status needs --server=host:port (a running job's Reverb server) or "
            "--root_dir=DIR (a run's files, finished or not)."
        )
    summary = run_summary.read_run(FLAGS.root_dir)
    if summary.is_empty:
        raise config_lib.ConfigError(
            f"{FLAGS.root_dir} holds no run yet (no {paths.RUN_INFO_FILE}, learner "
            "checkpoint or evaluation results). For a running job's tables pass "
            "--server=host:port."
        )
    print(run_summary.format_run(summary), flush=True)
    return 0


def run() -> None:
    _common.run(main, ("root_dir", "connect_timeout", "verbose"))


if __name__ == "__main__":
    run()
