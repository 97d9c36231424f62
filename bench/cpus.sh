# Sourced by the bench scripts: the CPUs they may use.

# One CPU number per line, from this process's affinity list (like 0-3,6).
allowed_cpus() {
  local part
  for part in $(grep Cpus_allowed_list /proc/self/status | cut -f2 | tr , ' '); do
    if [[ $part == *-* ]]; then
      seq "${part%-*}" "${part#*-}"
    else
      echo "$part"
    fi
  done
}

# "FIRST_HALF SECOND_HALF" of those CPUs, as comma lists for taskset (the
# server's and the client's); prints nothing with fewer than 2 CPUs.
split_allowed_cpus() {
  local cpus half
  mapfile -t cpus < <(allowed_cpus)
  ((${#cpus[@]} >= 2)) || return 0
  half=$((${#cpus[@]} / 2))
  echo "$(IFS=,; echo "${cpus[*]:0:half}") $(IFS=,; echo "${cpus[*]:half:half}")"
}
