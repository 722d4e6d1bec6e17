#!/usr/bin/env bash
# Builds the CPU-only copy of the pinned stack that benchmarks/device/run.sh unpacks on the
# lent GPU machine, and splits it into parts small enough to travel one per device call.
#
# Why a carried stack: the device image has Python 3.12, CUDA 13 and cuDNN 9 and reaches
# no package index; TensorFlow 2.15.1 and dm-reverb 0.14.0 have wheels for CPython <= 3.11
# only, and TF 2.15's GPU build links CUDA 12.2 / cuDNN 8.9 (about 2.5 GB of nvidia-*-cu12
# wheels). A device call carries at most 64 MiB, so this ships Python 3.11 itself plus a
# virtualenv with tensorflow-cpu==2.15.1 (the same version, no GPU kernels), at the paths
# they have here, as zstd parts of PART_MB each.
#
# usage (repo root): bash benchmarks/device/build_stack.sh   -> .devstack/p0 .. pN
set -euo pipefail
PY_HOME=${PY_HOME:-/root/.pyenv/versions/3.11.7}
VENV=${VENV:-/opt/sacvenv}
PART_MB=${PART_MB:-47}  # 64 MiB a call, less the tracked tree (about 14 MiB)
OUT_DIR=${OUT_DIR:-.devstack}
mkdir -p .git/info && touch .git/info/exclude
grep -qx '/.devstack/' .git/info/exclude || echo '/.devstack/' >> .git/info/exclude

# The venv: what `make test` installs, with tensorflow-cpu for tensorflow, and without the
# pieces no device measurement loads (pybullet, Ray, docs, notebook, plotting, video).
rm -rf "$VENV"
"$PY_HOME/bin/python3.11" -m venv "$VENV"
.venv/bin/pip freeze | grep -v -E '^(tensorflow==|pybullet|ray==|mkdocs|ipython|ipykernel|jupyter|nbclient|nbformat|ruff|py-spy|pygame|debugpy|jedi|parso|prompt_toolkit|pexpect|ptyprocess|stack-data|pure_eval|executing|asttokens|matplotlib|comm|pyzmq|tornado|traitlets|nest-asyncio|babel|backrefs|ghp-import|griffelib|mergedeep|paginate|pymdown|pyyaml_env_tag|watchdog|kubernetes-validate|#|-e |wcwidth|jsonschema|referencing|rpds|fastjsonschema|platformdirs|imageio-ffmpeg|libclang|fonttools|contourpy|kiwisolver|cycler|tensorboard-data-server|tensorflow-io-gcs-filesystem|mujoco-studio)' \
  > /tmp/devstack-requirements.txt
echo 'tensorflow-cpu==2.15.1' >> /tmp/devstack-requirements.txt
"$VENV/bin/pip" install -q --no-deps --no-compile -r /tmp/devstack-requirements.txt
rm -rf "$VENV/lib/python3.11/site-packages/tensorflow/include" \
  "$VENV/lib/python3.11/site-packages/mujoco/studio"
find "$VENV" -name __pycache__ -type d -prune -exec rm -rf {} +

rm -rf "$OUT_DIR" && mkdir -p "$OUT_DIR/p0"
cp /usr/bin/zstd "$OUT_DIR/p0/"  # the device image may lack it
tar -C / -c -f - \
  --exclude="${PY_HOME#/}/lib/python3.11/site-packages/*" --exclude="${PY_HOME#/}/lib/python3.11/test" \
  --exclude='__pycache__' --exclude='*/idlelib' --exclude='*/tkinter' --exclude='*/turtledemo' \
  "${PY_HOME#/}/bin/python3.11" "${PY_HOME#/}/lib/libpython3.11.so.1.0" \
  "${PY_HOME#/}/lib/python3.11" "${VENV#/}" \
  | zstd -q -T2 -15 --long=27 -o "$OUT_DIR/stack.tar.zst" -f
split -b "${PART_MB}m" -d -a 1 "$OUT_DIR/stack.tar.zst" "$OUT_DIR/part."
rm "$OUT_DIR/stack.tar.zst"
i=0
for part in "$OUT_DIR"/part.*; do
  mkdir -p "$OUT_DIR/p$i" && mv "$part" "$OUT_DIR/p$i/"
  i=$((i + 1))
done
du -sh "$OUT_DIR"/p*
