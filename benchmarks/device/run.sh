#!/usr/bin/env bash
# What runs on the lent GPU machine (one call, after the stack's parts have landed in
# /tmp/parts; see benchmarks/device/README.md). Every figure goes under $OUT, named with
# the machine it ran on. Budgets are tight: the whole call is about 6 minutes.
#
# usage (repo root, on the device): bash benchmarks/device/run.sh [PARTS_DIR]
set -uo pipefail
PARTS=${1:-/tmp/parts}
OUT=${OUT:-/tmp/device_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
PY=/opt/sacvenv/bin/python
# Smaller settings for the CPU rehearsal here: ACTOR_COUNTS=1,2 ACTOR_STEPS=2000 DURATION=2
ACTOR_COUNTS=${ACTOR_COUNTS:-1,4,8,14} ACTOR_STEPS=${ACTOR_STEPS:-20000} DURATION=${DURATION:-6}

{
  echo "## machine"
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "cores: $(nproc)"; grep -m1 'model name' /proc/cpuinfo
  echo "## Python and CUDA that the image holds"
  command -v python3 && python3 -V
  ls /usr/bin/python3* /usr/local/bin/python3* 2>/dev/null | tr '\n' ' '; echo
  python3 -m pip list 2>/dev/null | grep -i -E '^(nvidia-|tensorflow|torch |jax )' || true
  find / -xdev \( -name 'libcudart.so.*' -o -name 'libcudnn.so.*' -o -name 'libcublas.so.*' \) \
    2>/dev/null | sort | head -20
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

echo "## unpacking the stack"
ZSTD=$(command -v zstd || echo "$PARTS/zstd")
chmod +x "$PARTS/zstd" 2>/dev/null
start=$(date +%s)
cat "$PARTS"/part.* | "$ZSTD" -d -q | tar -C / -x || { echo "unpack failed"; exit 3; }
echo "unpacked in $(( $(date +%s) - start )) s"
$PY -c "import tensorflow as tf, reverb, tf_agents, sac_distributed
print('tensorflow', tf.__version__, 'devices', tf.config.list_physical_devices())" \
  2>&1 | grep -v Warning | tee -a "$OUT/machine.txt"

# A short training run of the product as processes, on this machine's CPUs.
timeout 90 $PY -m sac_distributed.bin.launch --env_name=HalfCheetah-v5 \
  --root_dir=/tmp/launch_smoke --num_actors=4 --num_iterations=300 \
  > "$OUT/launch_smoke.log" 2>&1
echo "sac-launch smoke exit $?" | tee -a "$OUT/machine.txt"

# The learner: stock TF-Agents against ours, replay-fed and on a constant batch, 16 cores.
for batch in 256 1024; do
  timeout 150 $PY benchmarks/compare.py --env_name=HalfCheetah-v5 --layers=256,256 \
    --batch_size=$batch --only=stock_learner,learner,learner_const_batch \
    --duration=$DURATION --repeats=2 --fill_items=20000 \
    > "$OUT/learner_b$batch.txt" 2> "$OUT/learner_b$batch.err"
  echo "learner batch $batch exit $?"; head -8 "$OUT/learner_b$batch.txt"
done

# Actors: 1, 4, 8 and 14 processes against one server, total env steps/s.
timeout 200 $PY benchmarks/compare.py --mode=actor_scaling --env_name=HalfCheetah-v5 \
  --actor_counts=$ACTOR_COUNTS --actor_steps=$ACTOR_STEPS --repeats=1 \
  > "$OUT/actor_scaling.txt" 2> "$OUT/actor_scaling.err"
echo "actor scaling exit $?"; head -12 "$OUT/actor_scaling.txt"
for f in "$OUT"/*.err; do tail -c 20000 "$f" > "$f.tail" && mv "$f.tail" "$f"; done
