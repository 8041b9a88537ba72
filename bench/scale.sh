#!/usr/bin/env bash
# Issue 19: `parmon report` on generated per-rank sessions of many ranks (a halo exchange on a
# ring with late senders, 8 ranks per host, host clocks offset; src/synth/halo_session.h): peak
# memory and time against the number of rank files, printed as a table.
#
#   bench/scale.sh [BIN_DIR] [RANKS...]      # default: build/release/bin, 256 1024 4096
#   ITERATIONS=100 THREADS=2 KEEP=1 bench/scale.sh
#
# Peak memory is the report process's maximum resident set (GNU time's %M); cpu is user+system.
# Each session is generated once into $TMPDIR (or /tmp) and removed afterwards unless KEEP=1.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/release/bin}
shift || true
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(256 1024 4096)
iterations=${ITERATIONS:-100}
threads=${THREADS:-2}
tmp=${TMPDIR:-/tmp}
for tool in parmon parmon-synth; do
  [ -x "$bin/$tool" ] || { echo "scale.sh: $bin/$tool is not built" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "scale.sh: needs GNU time (/usr/bin/time)" >&2; exit 2; }

printf '%8s %10s %10s %10s %10s %9s %9s %12s %7s\n' ranks events files_MB gen_s peak_MB wall_s cpu_s KB_per_rank truth
for n in "${ranks[@]}"; do
  run="$tmp/parmon_scale_$n.$$"
  rm -rf "$run"
  t0=$(date +%s.%N)
  "$bin/parmon-synth" -o "$run" --ranks "$n" --iterations "$iterations" --threads "$threads" \
    --truth "$run.truth" > "$run.synth"
  t1=$(date +%s.%N)
  events=$(sed -n 's/.* \([0-9]*\) events.*/\1/p' "$run.synth")
  files_mb=$(du -sm "$run" | cut -f1)
  /usr/bin/time -f '%M %e %U %S' -o "$run.time" "$bin/parmon" report "$run" --format json \
    > "$run.json"
  read -r peak_kb wall user sys < "$run.time"
  # The report against the generator's truth: messages exact, late-sender time within 5%.
  truth=$(python3 - "$run.json" "$run.truth" <<'PY'
import json, sys
r, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
locs = [l for l in r["locations"] if l["label"].startswith("rank ")]
sent = sum(l["messages_sent"] for l in locs)
late = sum(l["late_sender_ns"] for l in locs)
want = sum(t["late_sender_ns"])
print("ok" if sent == t["messages"] and abs(late - want) <= 0.05 * want else "WRONG")
PY
)
  awk -v n="$n" -v ev="$events" -v mb="$files_mb" -v g="$(echo "$t1 - $t0" | bc)" \
      -v pk="$peak_kb" -v w="$wall" -v u="$user" -v s="$sys" 'BEGIN {
    printf "%8d %10d %10d %10.1f %10.1f %9.2f %9.2f %12.1f ", n, ev, mb, g, pk / 1024, w, u + s, pk / n
  }'
  echo "$truth"
  [ "${KEEP:-0}" = 1 ] || rm -rf "$run" "$run.synth" "$run.time" "$run.json" "$run.truth"
done
