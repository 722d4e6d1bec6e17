"""CrossQ (Bhatt, Palenicek et al., ICLR 2024): config (the registry entry and its
checks, no TensorFlow), networks, the update and the learner."""
