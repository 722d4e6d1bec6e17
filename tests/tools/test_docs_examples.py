"""The docs' runnable code blocks run, as a reader would type them (tiny budgets).

A block is runnable when the line before its opening fence is an HTML comment
that starts with `<!-- runnable` (invisible on the site):

    <!-- runnable: tests/tools/test_docs_examples.py runs this block, tiny --num_iterations -->
    ```sh
    sac-launch --env_name=Pendulum-v1 --num_iterations=3000 --root_dir=runs/pendulum
    ```

Each block runs in bash (`set -euo pipefail`: every line must succeed) in a fresh
folder holding a copy of examples/, with the virtualenv's bin/ first on PATH, as
after `. .venv/bin/activate`. The one change made to the text: every
`--num_iterations=N` becomes `--num_iterations=200`, so a block's training run
takes seconds of training instead of minutes; so write the budget as that flag.
The pages listed in RUNNABLE_PAGES must each hold at least one runnable block.
"""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from support.processes import DEADLINE_S
from support.repo import DOCS_DIR, EXAMPLES_DIR

pytestmark = pytest.mark.slow
RUNNABLE_PAGES = ("getting-started.md", "own-env.md")
TINY_ITERATIONS = 200

_BLOCK = re.compile(
    r"^<!-- runnable[^\n]*-->\n"
    r"(?P<indent>[ \t]*)```(?P<lang>\w*)[^\n]*\n(?P<body>.*?)^(?P=indent)```",
    re.MULTILINE | re.DOTALL,
)


def runnable_blocks(page: str):
    with open(os.path.join(DOCS_DIR, page), encoding="utf-8") as f:
        text = f.read()
    return [(m.group("lang"), m.group("body")) for m in _BLOCK.finditer(text)]


def _all_runnable():
    found = []
    for page in sorted(os.listdir(DOCS_DIR)):
        if page.endswith(".md"):
            found += [(page, i, body) for i, (_, body) in enumerate(runnable_blocks(page))]
    return found


def test_every_page_that_should_have_runnable_blocks_has_them():
    for page in RUNNABLE_PAGES:
        blocks = runnable_blocks(page)
        assert blocks, f"docs/{page} has no block marked <!-- runnable -->"
        for lang, body in blocks:
            assert lang in ("sh", "bash"), (page, lang)
            assert "--num_iterations=" in body or "sac-launch" not in body, body


@pytest.mark.parametrize(
    "page,index,body", _all_runnable(), ids=lambda v: str(v)[:30] if isinstance(v, str) else v
)
def test_runnable_block_runs(page, index, body, tmp_path):
    shutil.copytree(
        EXAMPLES_DIR,
        tmp_path / "examples",
        ignore=shutil.ignore_patterns("sac_runs", "runs", "__pycache__"),
    )
    script = re.sub(r"--num_iterations=\d+", f"--num_iterations={TINY_ITERATIONS}", body)
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        stdin=subprocess.DEVNULL,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"docs/{page} block {index} failed:\n{script}\n{out[-5000:]}"
    # What each kind of command in the blocks prints when it did its work.
    if "sac-launch" in script:
        assert "training finished; every job exited 0" in out, out[-3000:]
        assert f"at train_step {TINY_ITERATIONS}" in out, out[-3000:]
    if "sac-evaluate" in script:
        assert re.search(r"\d+ episodes: return mean", out), out[-3000:]
    if "sac-status --root_dir" in script:
        assert "learner checkpoints:" in out, out[-3000:]
    if "sac-plot" in script:
        assert "learning_curve.png" in out, out[-3000:]
    if "--env_name=pointmass:make_env" in script:
        _check_user_env_run(tmp_path, out)


def _check_user_env_run(folder, out: str) -> None:
    """docs/own-env.md: examples/pointmass.py (Gymnasium API, registered nowhere) trained
    from its folder, then evaluated from another with no PYTHONPATH: the run recorded
    where the module is."""
    examples = str(folder / "examples")
    assert "env pointmass.make_env(**env_kwargs), a user factory" in out, out[-3000:]
    with open(os.path.join(examples, "runs", "pointmass", "run_info.json")) as f:
        info = json.load(f)
    assert info["env_name"] == "pointmass:make_env"
    assert info["env_loader"] == "factory" and info["env_module_dir"] == examples
    assert json.loads(info["env_kwargs"]) == {"goal_radius": 0.2}
    assert "on pointmass:make_env" in out, out[-3000:]
