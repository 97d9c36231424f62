#!/usr/bin/env bash
# Installs the Python client (python/kmt) with stubs generated from proto/
# now, so that it needs neither the checkout nor protoc afterwards, and its
# compiled driver (kmt._driver, python/ext), built with the project in
# build/ (KMT_BUILD_DIR=... to choose another; configured here if it is not).
#   scripts/install-python-client.sh           into python3's site directory
#   scripts/install-python-client.sh DIR       into DIR (then PYTHONPATH=DIR)
# The Debian packages it needs come from scripts/install-deps.sh; their
# interpreter is /usr/bin/python3 (PYTHON=... to choose another).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-/usr/bin/python3}"
target="${1:-$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')}"
build="${KMT_BUILD_DIR:-build}"
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKMT_PYTHON="$python" >/dev/null
fi
cmake --build "$build" -j2 --target kmt_python_driver >/dev/null
mkdir -p "$target"
rm -rf "$target/kmt"
cp -r python/kmt "$target/kmt"
find "$target/kmt" -name __pycache__ -prune -exec rm -rf {} +
cp "$build"/python/kmt/_driver*.so "$target/kmt/"
"$python" -c 'import sys; sys.path.insert(0, "python/kmt"); import stubs
stubs.generate(stubs.checkout_proto(), sys.argv[1])' "$target/kmt/_generated"
echo "installed kmt into $target" >&2
