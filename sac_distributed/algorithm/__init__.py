"""The algorithms: one folder each (sac/, crossq/) behind the `Learner` interface
(learner.py) and one registry of them (registry.py), and what they share
(checkpoints, strategy, traced functions, the NumPy acting policy). Imports no
Reverb, no processes, no flags.
"""
