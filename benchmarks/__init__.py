"""The benchmarks, importable as a package (`from benchmarks import learning`).

Importing it imports nothing else: the SB3 peer runs under benchmarks/.venv-sb3,
which has no TensorFlow. Each entry script also runs as a file
(`python benchmarks/compare.py`), and puts the repository root on its path for that.
"""
