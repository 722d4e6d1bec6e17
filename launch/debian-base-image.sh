#!/usr/bin/env bash
# Builds a Python 3.11 base image for launch/Dockerfile from Debian's own
# packages, for a Docker host that cannot pull from Docker Hub:
#
#     sudo launch/debian-base-image.sh [IMAGE]        # default: sac-distributed-base:bookworm
#     docker build -f launch/Dockerfile --build-arg BASE_IMAGE=sac-distributed-base:bookworm \
#         -t sac-distributed:latest .
#
# Needs root, debootstrap and a reachable Debian mirror (DEBIAN_MIRROR, default
# deb.debian.org). Debian bookworm's python3 is 3.11, the newest Python that
# dm-reverb 0.14 and TensorFlow 2.15 have wheels for. The image:
#   * has `python` (python-is-python3), pip and venv, as python:3.11-slim does;
#   * sets PIP_BREAK_SYSTEM_PACKAGES=1: Debian's pip refuses system-wide installs
#     otherwise (PEP 668), and the image is a container, not a system to protect;
#   * trusts the CA certificates this host trusts (its /etc/ssl/certs bundle is
#     copied in), so that pip in the build reaches the package index through the
#     same TLS-intercepting proxy, if any, that the host goes through.
set -euo pipefail

IMAGE="${1:-sac-distributed-base:bookworm}"
SUITE="${DEBIAN_SUITE:-bookworm}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
HOST_CA="${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

for tool in debootstrap docker tar; do
  command -v "$tool" >/dev/null || { echo "$0: needs $tool (apt-get install debootstrap docker.io)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "$0: debootstrap needs root; run it with sudo" >&2; exit 2; }

ROOTFS="$(mktemp -d)"
trap 'rm -rf "$ROOTFS"' EXIT
debootstrap --variant=minbase \
  --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates \
  "$SUITE" "$ROOTFS" "$MIRROR"
if [ -f "$HOST_CA" ]; then
  cp "$HOST_CA" "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
fi
# Package lists and downloaded .debs are not needed at run time.
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/archives/*.deb
tar -C "$ROOTFS" -c . | docker import \
  --change 'ENV PIP_BREAK_SYSTEM_PACKAGES=1' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  - "$IMAGE"
docker run --rm "$IMAGE" python -c 'import sys, venv, pip; print("base image python", sys.version.split()[0])'
echo "built $IMAGE"
