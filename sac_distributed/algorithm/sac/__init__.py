"""SAC (Haarnoja et al. 2018) on TF-Agents' SacAgent: config (the registry entry, no
TensorFlow), networks, the update (with its prioritized-replay variant) and the learner."""
