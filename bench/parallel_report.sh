#!/usr/bin/env bash
# Issue 19: the parallel report (`mpirun -np K parmon report RUN`) against one `parmon report`, on
# generated per-rank sessions (parmon-synth: a halo exchange on a ring with late senders, 8 ranks
# per host, host clocks offset). For each rank count, ROUNDS rounds alternate K = 1 (plain
# `parmon report`) and K (under mpirun), so that both meet the same load; the table has the
# median wall time of each, the speed-up measured in the same run, peak memory (the largest
# process), CPU (all processes), and whether the two reports are the same bytes.
#
#   bench/parallel_report.sh [BIN_DIR] [RANKS...]      # default: build/release/bin, 256 1024 4096
#   K=2 ROUNDS=5 FORMAT=json ITERATIONS=100 bench/parallel_report.sh
#
# wall_K is the whole `mpirun -np K parmon report` command, MPI start-up included; proc_K is the
# longest report process's own wall time (from its start under mpirun to its exit).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/build/release/bin}
shift || true
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(256 1024 4096)
k=${K:-2}
rounds=${ROUNDS:-5}
format=${FORMAT:-json}
iterations=${ITERATIONS:-100}
tmp=${TMPDIR:-/tmp}
for tool in parmon parmon-synth; do
  [ -x "$bin/$tool" ] || { echo "parallel_report.sh: $bin/$tool is not built" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "parallel_report.sh: needs GNU time (/usr/bin/time)" >&2; exit 2; }
command -v mpirun > /dev/null || { echo "parallel_report.sh: needs mpirun" >&2; exit 2; }
mpirun=(mpirun --oversubscribe -np "$k")
[ "$(id -u)" = 0 ] && mpirun=(mpirun --allow-run-as-root --oversubscribe -np "$k")

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%7s %9s %8s %8s %8s %7s %9s %9s %8s %8s %5s\n' ranks events wall_1 wall_K proc_K \
  speedup peak1_MB peakK_MB cpu_1 cpu_K same
for n in "${ranks[@]}"; do
  run="$tmp/parmon_parallel_$n.$$"
  rm -rf "$run" "$run".*
  "$bin/parmon-synth" -o "$run" --ranks "$n" --iterations "$iterations" --threads 2 > "$run.synth"
  events=$(sed -n 's/.* \([0-9]*\) events.*/\1/p' "$run.synth")
  : > "$run.w1"; : > "$run.wk"; : > "$run.pk"; : > "$run.m1"; : > "$run.mk"; : > "$run.c1"
  : > "$run.ck"
  same=yes
  for ((r = 0; r < rounds; r++)); do
    /usr/bin/time -f '%M %e %U %S' -o "$run.t1" "$bin/parmon" report "$run" --format "$format" \
      > "$run.out1"
    read -r m1 w1 u1 s1 < "$run.t1"
    echo "$w1" >> "$run.w1"; echo "$m1" >> "$run.m1"; echo "$u1 $s1" | awk '{ print $1 + $2 }' >> "$run.c1"
    rm -f "$run".tk.*
    t0=$(date +%s.%N)
    "${mpirun[@]}" sh -c '/usr/bin/time -f "%M %e %U %S" -o "$0.tk.${OMPI_COMM_WORLD_RANK:-$PMI_RANK}" "$@"' \
      "$run" "$bin/parmon" report "$run" --format "$format" > "$run.outk"
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc >> "$run.wk"
    cat "$run".tk.* | awk '{ if ($1 > m) m = $1; if ($2 > w) w = $2; c += $3 + $4 }
                           END { print m > "/dev/stderr"; print w; print c > "/dev/fd/3" }' \
      2>> "$run.mk" 3>> "$run.ck" >> "$run.pk"
    cmp -s "$run.out1" "$run.outk" || same=NO
  done
  w1=$(median < "$run.w1"); wk=$(median < "$run.wk"); pk=$(median < "$run.pk")
  awk -v n="$n" -v ev="$events" -v w1="$w1" -v wk="$wk" -v pk="$pk" \
      -v m1="$(median < "$run.m1")" -v mk="$(median < "$run.mk")" \
      -v c1="$(median < "$run.c1")" -v ck="$(median < "$run.ck")" -v same="$same" 'BEGIN {
    printf "%7d %9d %8.2f %8.2f %8.2f %6.2fx %9.1f %9.1f %8.2f %8.2f %5s\n",
      n, ev, w1, wk, pk, w1 / wk, m1 / 1024, mk / 1024, c1, ck, same
  }'
  [ "${KEEP:-0}" = 1 ] || rm -rf "$run" "$run".*
done
echo "(K = $k, $rounds rounds alternating, medians; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"
