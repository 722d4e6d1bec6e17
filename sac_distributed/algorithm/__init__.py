"""The algorithm: networks, the agent factory, the SAC update, the NumPy actor
policy, env loading and specs. Imports no Reverb, no processes, no flags.
"""
