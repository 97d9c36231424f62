#!/bin/bash
# What kmt-server's default of running its network threads under SCHED_BATCH
# buys against letting them preempt the workers (--io_preempts_workers).
# One server and one `kmt bench` run; every PHASE the policy of every server
# thread but the workers is switched with chrt, so both policies see the
# same connections and the same drift of the machine's speed.
#
#   bench/sched_policy_ab.sh                      # 20 phases of 3 s, 2 streams
#   PHASES=10 PHASE=2 STREAMS=4 bench/sched_policy_ab.sh
#   SHARED=1 bench/sched_policy_ab.sh             # server and client on all CPUs
#
# The server runs on the first half of the CPUs this script may use, the
# client on the other half (as in service_bench.sh's own-cores rows; needs
# 2 CPUs); with SHARED=1 both run on all of them. Prints a row per phase (batches/s from the server's
# kmt_batches_total, server CPU per batch from /proc), then per policy the
# mean, and the phase pairs' ratios BATCH / OTHER.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
source bench/lib.sh
PHASES=${PHASES:-20}
PHASE=${PHASE:-3}
STREAMS=${STREAMS:-2}
if ((PHASES < 2 || PHASES % 2)); then
  echo "PHASES must be even and at least 2" >&2
  exit 1
fi
read -r server_cpus client_cpus < <(split_allowed_cpus) || true
if [[ -n ${SHARED:-} ]]; then
  server_cpus=$(allowed_cpus | paste -sd,)
  client_cpus=$server_cpus
elif [[ -z $client_cpus ]]; then
  echo "needs at least 2 CPUs (or SHARED=1)" >&2
  exit 1
fi
work=$(mktemp -d)
client=
cleanup() {
  if [[ -n $client ]]; then
    kill "$client" 2>/dev/null || true
    wait "$client" 2>/dev/null || true
  fi
  stop_server
  rm -rf "$work"
}
trap cleanup EXIT

start_server "$work" "$server_cpus" --not_serving_delay=0s --io_preempts_workers

batches() {  # the server's kmt_batches_total, summed over its labels
  scrape_metrics | awk '/^kmt_batches_total/ { s += $2 } END { printf "%d\n", s }'
}
# -o (SCHED_OTHER) or -b (SCHED_BATCH) for every thread but the workers;
# fails unless every such thread then has it (policy: field 41 of stat).
set_policy() {
  local want=0 task
  [[ $1 == -b ]] && want=3
  for task in /proc/"$server"/task/*; do
    [[ $(cat "$task/comm" 2>/dev/null) == kmt-worker ]] && continue
    chrt "$1" -p 0 "${task##*/}" >/dev/null 2>&1 || true  # a thread may just have ended
    if [[ -e $task/stat && $(sed 's/.*) //' "$task/stat" | cut -d' ' -f39) != "$want" ]]; then
      echo "thread ${task##*/} ($(cat "$task/comm")) did not take policy $1" >&2
      exit 1
    fi
  done
}

taskset -c "$client_cpus" "$BUILD/client/kmt" bench --server="$target" \
  --concurrency="$STREAMS" --duration=$((PHASES * (PHASE + 1) + 10))s \
  --n=4096 --d=32 --k=16 --iterations=10 >"$work/client.txt" &
client=$!
sleep 2  # connected and warm

hz=$(getconf CLK_TCK)
echo "Server on CPUs $server_cpus, client on CPUs $client_cpus, $STREAMS streams of n = 4096, d = 32, k = 16, 10 iterations, $PHASES phases of ${PHASE} s"
echo
echo "| phase | network threads | batches/s | server CPU per batch |"
echo "|---|---|---|---|"
rows=()
for phase in $(seq "$PHASES"); do
  if ((phase % 2)); then policy=-o name=OTHER; else policy=-b name=BATCH; fi
  set_policy "$policy"
  sleep 0.3  # let the switch settle
  b0=$(batches) c0=$(server_cpu_ticks) t0=$(date +%s.%N)
  sleep "$PHASE"
  b1=$(batches) c1=$(server_cpu_ticks) t1=$(date +%s.%N)
  row=$(awk -v b="$((b1 - b0))" -v c="$((c1 - c0))" -v t0="$t0" -v t1="$t1" -v hz="$hz" \
    'BEGIN { if (b <= 0) exit 1; printf "%.1f %.3f", b / (t1 - t0), 1e3 * c / hz / b }') || {
    echo "no batches answered in phase $phase" >&2
    exit 1
  }
  rows+=("$name $row")
  read -r rate ms <<<"$row"
  echo "| $phase | $name | $rate | $ms ms |"
done
echo
printf '%s\n' "${rows[@]}" | awk '
  { rate[NR] = $2; cpu[NR] = $3; n[$1]++; sum[$1] += $2; ms[$1] += $3 }
  END {
    for (i = 2; i <= NR; i += 2) {
      r = rate[i] / rate[i - 1]; ratios = ratios sprintf(" %.3f", r)
      total += r; if (r > 1) ++won
    }
    printf "OTHER (--io_preempts_workers): %.1f batches/s, %.3f ms server CPU per batch\n", sum["OTHER"] / n["OTHER"], ms["OTHER"] / n["OTHER"]
    printf "BATCH (default):               %.1f batches/s, %.3f ms server CPU per batch\n", sum["BATCH"] / n["BATCH"], ms["BATCH"] / n["BATCH"]
    printf "BATCH / OTHER by pair:%s; mean %.3f, BATCH ahead in %d of %d\n", ratios, total / (NR / 2), won, NR / 2
  }'
