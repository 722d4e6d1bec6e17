"""A tiny algorithm defined outside the package, as a user's would be: TF-Agents'
SacAgent trained through its public `train`, under its own name and checkpoint key.

It is one folder with an algorithm folder's file names (config.py, the registry
entry without TensorFlow; learner.py) and is registered with
SAC_ALGORITHMS=tiny_algorithm.config:ALGORITHM (tests/processes/test_registered_algorithm.py).
"""
