"""What the test files share, defined once (no test file imports another, nor conftest).

* `repo`: paths: the repository, tests/ (where user_envs.py and tiny_algorithm/
  live, the cwd or PYTHONPATH of a binary that loads them), tests/data/.
* `training`: in-process helpers: small configs, random transitions and
  observations, waiting on a replay table, a learner config, constant batches and
  the CrossQ learner on them, the exported-policy-versus-evaluator check. conftest.py
  builds its fixtures on them.
* `processes`: starting the real binaries as subprocesses, polling their logs with
  deadlines, reading their errors; the tiny run flags.
* `launch_files`: reading launch/: the compose file (Compose's interpolation, strict
  YAML), the Dockerfile, the Kubernetes manifests (a small kustomize), and the
  binaries' own flag parsers run on command lines.
* `compose_run`: the compose commands run on localhost: processes, healthchecks,
  the tiny budget (test_compose_run, test_kubernetes_run).
* `learning_cli`: benchmarks/learning.py's CLI run in the pytest worker.
* `notebook_kernels`: Jupyter kernels on other Pythons, set up as Colab's is.
* `cpu_profile`: an opt-in pytest plugin counting each test's CPU seconds
  (`PYTHONPATH=tests pytest -p support.cpu_profile`).
"""
