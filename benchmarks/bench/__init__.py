"""The pieces the benchmark scripts in benchmarks/ are built from.

compare.py (stock TF-Agents SAC vs ours, one machine) is a thin entry over:

  settings        its command line (Settings) and the hyperparameters it measures with
  timing          timed windows and medians
  stock           the TF-Agents SAC tutorial's pieces (also peer_stock.py's loop)
  experience      random experience in both sides' formats, writing it to replay
  servers         Reverb servers in child processes and their memory
  fixtures        the lazily built servers, agents and learners the pieces share
  pieces          one throughput measurement per piece, stock and ours
  throughput      throughput mode: alternating rounds, medians, the report
  actor_scaling   actor_scaling mode: N actor processes against one server
  shards          replay_shards mode: inserts/s and samples/s over S server processes
  shard_worker    one writer/sampler process of replay_shards mode
  cgroups         replay_shards mode's --server_cpus: a CPU quota per server process
  time_to_return  time_to_return mode: wall time to a target eval return
  sac_launch      running `sac-launch` (also learning.py and probe.py's modes)

Importing this package imports sac_distributed first, which selects tf-keras
before any module here imports TensorFlow.
"""

import sac_distributed  # noqa: F401
