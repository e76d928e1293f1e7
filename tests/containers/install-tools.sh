#!/usr/bin/env bash
# What the container tests need beyond `make install`: Debian's podman, runc (crun fails on these
# machines) and debootstrap (the base image is built from Debian packages: nothing can be pulled
# from a registry), and podman-compose in the project's venv. Installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

missing=()
for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
  if [[ $(id -u) != 0 ]]; then
    echo "the container tests need ${missing[*]} (apt-get install ${missing[*]}) and root" >&2
    exit 1
  fi
  echo "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
.venv/bin/python -c 'import podman_compose' 2>/dev/null \
  || .venv/bin/pip install --quiet -c constraints.txt -r tests/containers/requirements.txt
