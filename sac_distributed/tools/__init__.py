"""Tools on a run: status, plots, policy inspection (no TensorFlow at import)."""
