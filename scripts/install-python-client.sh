#!/usr/bin/env bash
# Installs the Python client (python/kmt) with stubs generated from proto/
# now, so that it needs neither the checkout nor protoc afterwards.
#   scripts/install-python-client.sh           into python3's site directory
#   scripts/install-python-client.sh DIR       into DIR (then PYTHONPATH=DIR)
# The Debian packages it needs come from scripts/install-deps.sh; their
# interpreter is /usr/bin/python3 (PYTHON=... to choose another).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-/usr/bin/python3}"
target="${1:-$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')}"
mkdir -p "$target"
rm -rf "$target/kmt"
cp -r python/kmt "$target/kmt"
find "$target/kmt" -name __pycache__ -prune -exec rm -rf {} +
"$python" -c 'import sys; sys.path.insert(0, "python/kmt"); import stubs
stubs.generate(stubs.checkout_proto(), sys.argv[1])' "$target/kmt/_generated"
echo "installed kmt into $target" >&2
