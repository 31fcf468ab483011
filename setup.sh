#!/usr/bin/env bash
# Set up innet on a fresh Debian 12 machine: the Debian packages the network parts need (when
# run as root), then a virtual environment in .venv with innet and its test tools.
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")"

# Mininet (mnexec), namespaces and veths (iproute2), offload switches (ethtool), captures.
DEBIAN_PACKAGES=(mininet bridge-utils iputils-ping iproute2 ethtool tcpdump psmisc procps)

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
fi
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: not root, skipping Debian packages ${missing[*]} (Mininet tests will skip)"
  fi
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
echo "setup: ready (.venv/bin/innet)"
