# Sourced by the bench scripts: the CPUs they may use, and a kmt-server of
# their own. Expects BUILD (the build directory).

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

server=
# start_server DIR CPUS [kmt-server flags...]: a server with the exact models
# only, on free loopback ports, pinned to CPUS (a taskset list; empty: not
# pinned), its files in DIR. Sets server (the pid), target (host:port) and
# metrics_port; returns once both ports are known.
start_server() {
  local dir=$1 cpus=$2 pin=()
  shift 2
  if [[ -n $cpus ]]; then pin=(taskset -c "$cpus"); fi
  rm -f "$dir/port" "$dir/metrics_port"
  "${pin[@]}" "$BUILD/server/kmt-server" --model_dir= --listen=127.0.0.1:0 \
    --metrics_listen=127.0.0.1:0 --port_file="$dir/port" \
    --metrics_port_file="$dir/metrics_port" "$@" 2>"$dir/server.log" &
  server=$!
  for _ in $(seq 100); do
    if [[ -s $dir/port && -s $dir/metrics_port ]]; then break; fi
    sleep 0.1
  done
  target=127.0.0.1:$(cat "$dir/port")
  metrics_port=$(cat "$dir/metrics_port")
}

# The server's /metrics page on stdout, over bash's /dev/tcp (no curl).
scrape_metrics() {
  exec 3<>"/dev/tcp/127.0.0.1/$metrics_port"
  printf 'GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
  cat <&3
  exec 3<&-
}

stop_server() {
  if [[ -n $server ]]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  server=
}

# User plus system CPU of the server so far, in clock ticks (getconf CLK_TCK).
server_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$server/stat"; }
