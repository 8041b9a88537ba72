#!/usr/bin/env bash
# Issue 16: `parmon export` throughput (events per second per core) and peak memory on a large
# recorded trace, for every format, as a table.
#
#   bench/export.sh [BIN_DIR]                       # default: build/release/bin, 100 M events
#   EVENTS=20000000 FORMATS="otf2 csv" KEEP=1 bench/export.sh
#
# The trace is a real recording: `parmon record` of threads_regions (4 threads entering and
# leaving a region, tests/programs), sized to EVENTS region events, plus the context switches
# and sampler records the recorder adds. Peak memory is the export process's maximum resident
# set (GNU time's %M); events/s per core divides the events read by user+system CPU seconds, so
# other load on the machine slows the wall time but not that figure. Chrome JSON and CSV go to
# /dev/null (their size is counted through a pipe to wc), OTF2 and Perfetto to $TMPDIR.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/release/bin}
events=${EVENTS:-100000000}
threads=${THREADS:-4}
formats=${FORMATS:-otf2 perfetto chrome-json csv}
tmp=${TMPDIR:-/tmp}/parmon_export_bench.$$
for tool in parmon threads_regions; do
  [ -x "$bin/$tool" ] || { echo "export.sh: $bin/$tool is not built" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "export.sh: needs GNU time (/usr/bin/time)" >&2; exit 2; }
mkdir -p "$tmp"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT

iterations=$((events / threads / 2))
trace="$tmp/threads.ptrace"
t0=$(date +%s.%N)
"$bin/parmon" record -q -o "$trace" -- "$bin/threads_regions" "$threads" "$iterations" > /dev/null
t1=$(date +%s.%N)
info=$("$bin/parmon" info "$trace")
total=$(echo "$info" | sed -n 's/^ *events:* *\([0-9][0-9]*\).*/\1/p' | head -1)
lost=$(echo "$info" | sed -n 's/.*lost[^0-9]*\([0-9][0-9]*\).*/\1/p' | head -1)
printf 'machine: %s, %s CPUs, load %s\n' "$(uname -n)" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'trace: %s events (%s lost) in %s MB, recorded in %.1f s\n' "${total:-?}" "${lost:-0}" \
  "$(du -m "$trace" | cut -f1)" "$(echo "$t1 - $t0" | bc)"
printf '%-12s %12s %9s %9s %14s %9s %10s\n' format events wall_s cpu_s events_per_s_core peak_MB out_MB
for f in $formats; do
  out="$tmp/out.$f"
  rm -rf "$out"
  case $f in
    otf2 | perfetto)
      /usr/bin/time -f '%M %e %U %S' -o "$tmp/time" "$bin/parmon" export "$trace" --format "$f" \
        -o "$out" > "$tmp/stdout" 2> "$tmp/stderr"
      out_mb=$(du -sm "$out" | cut -f1)
      ;;
    *)
      /usr/bin/time -f '%M %e %U %S' -o "$tmp/time" "$bin/parmon" export "$trace" --format "$f" \
        -o - 2> "$tmp/stderr" | wc -c > "$tmp/bytes"
      out_mb=$(($(cat "$tmp/bytes") / 1000000))
      ;;
  esac
  read -r peak_kb wall user sys < "$tmp/time"
  # "parmon export: N events -> M ... records" on stderr
  read_events=$(sed -n 's/^parmon export: \([0-9]*\) events.*/\1/p' "$tmp/stderr" | tail -1)
  # (to standard output it prints nothing: the whole trace is read)
  read_events=${read_events:-$total}
  cpu=$(echo "$user + $sys" | bc)
  rate=$(echo "${read_events:-0} / ($cpu + 0.001)" | bc)
  printf '%-12s %12s %9s %9s %14s %9s %10s\n' "$f" "${read_events:-?}" "$wall" "$cpu" "$rate" \
    "$((peak_kb / 1024))" "$out_mb"
  rm -rf "$out"
done
