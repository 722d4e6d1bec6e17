"""Launchers: job definitions, the local process supervisor, threads, Ray and
the Kubernetes manifests (the repository's launch/ folder keeps deployment files).
"""
