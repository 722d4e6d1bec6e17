"""Environments: from an `--env_name` to a checked TF-Agents env and its specs.

`loader.load_env` is the one entry point every job, tool and launcher uses:
`sources` says which env a name names and makes it (no TensorFlow, so a launcher
checks a name before any process starts), `observations` reads an observation
space part by part (vectors, images, Dict and Tuple) into one flat vector,
`gymnasium_env` adapts a Gymnasium env,
`loader` wraps and checks what was made, and `specs` holds the `EnvSpecs` that
every table signature and network is built from. Nothing here imports
`sac_distributed.algorithm`.
"""
