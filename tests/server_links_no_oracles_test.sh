#!/bin/bash
# Fails when kmt-server carries a test oracle: a function the reference
# library defines (ReferenceLloyd, the variants' references and circuits) is
# defined in the server's binary. The names are read from the library itself,
# less what the core defines too, so an oracle added later is covered.
#   server_links_no_oracles_test.sh KMT_SERVER LIBKMT_REFERENCE LIBKMT_CORE
set -euo pipefail
server=$1 reference=$2 core=$3

# The kmt:: functions a file defines, by name: "kmt::ReferenceLloyd" for
# every instantiation of it, whatever its return type.
functions() {
  nm -C --defined-only "$1" 2>/dev/null |
    sed -n -E 's/^[0-9a-f]+ [TtWw] (.* )?(kmt::[A-Za-z_][A-Za-z0-9_]*)(<[^ (]*>)?\(.*/\2/p' |
    sort -u
}

oracles=$(comm -23 <(functions "$reference") <(functions "$core"))
if ! grep -qx 'kmt::ReferenceLloyd' <<<"$oracles"; then
  echo "server_links_no_oracles_test: no kmt::ReferenceLloyd among the functions of $reference" >&2
  exit 1
fi
found=$(comm -12 <(echo "$oracles") <(functions "$server"))
if [[ -n $found ]]; then
  echo "server_links_no_oracles_test: $server defines test oracles:" >&2
  echo "$found" >&2
  exit 1
fi
echo "server_links_no_oracles_test: none of the $(wc -l <<<"$oracles") reference functions in $server"
