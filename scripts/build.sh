#!/usr/bin/env bash
# Installs the dependencies (Debian 12 packages) and builds everything into
# build/. Safe to run again: only what changed is rebuilt.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j2
