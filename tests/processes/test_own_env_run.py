"""A user's own env whose step fails mid-run, launched by sac-launch as processes.

(The working case, examples/pointmass.py trained from its folder and evaluated
from another, is docs/own-env.md's runnable block: tests/tools/test_docs_examples.py.)"""

import pytest
from support.processes import DEADLINE_S, TINY_RUN_FLAGS, run
from support.repo import TESTS_DIR

pytestmark = pytest.mark.slow


def test_an_env_that_fails_mid_run_stops_with_its_name_and_the_run_keeps_its_replay(tmp_path):
    root = tmp_path / "failing"
    launched = run(
        "launch",
        f"--root_dir={root}",
        "--env_name=user_envs:make_failing",
        # Step 150 comes after the 100-step warm-up, in the actor. The evaluator plays
        # one 100-step episode per evaluation and runs its second only at train step
        # 200, so it cannot meet the failure first.
        """--env_kwargs={"at": 150}""",
        *TINY_RUN_FLAGS,
        timeout_s=DEADLINE_S,
        cwd=TESTS_DIR,
    )
    out = launched.stdout + launched.stderr
    assert launched.returncode == 1, out[-4000:]
    assert "actor_0 exited with code 2" in out
    assert "user_envs:make_failing raised ValueError at step 150: solver diverged" in out
    # The other jobs were stopped in order: the server wrote what the actor had sent.
    assert "Replay checkpoint written" in (root / "logs" / "server.log").read_text()
    assert "Traceback" not in (root / "logs" / "actor_0.log").read_text()
