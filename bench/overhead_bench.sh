#!/usr/bin/env bash
# What recording costs an MPI+OpenMP program, and whether the report says so (issue 11): the
# halo exchange bench/halo_omp_mpi on 2 ranks x 2 OpenMP threads, run plain and under the default
# `parmon record` in trace and in periodic mode, interleaved round by round. Measured slowdown =
# the program's own loop time recorded / plain - 1 (medians over the rounds); the report's
# estimate = `overhead.estimated_slowdown` of `parmon report --format json` of each recorded run.
# Targets: slowdown <= 3% (trace), <= 1% (periodic); the estimate within a factor of 1.5 of the
# measured slowdown.
# usage: bench/overhead_bench.sh [BUILD_DIR] [ROUNDS] [ITERATIONS]
set -euo pipefail
build=${1:-build/release}
rounds=${2:-7}
iters=${3:-400}
bin=$build/bin
parmon=$bin/parmon
halo=$bin/halo_omp_mpi
[ -x "$halo" ] || { echo "overhead_bench: $halo not built (cmake --build $build --target halo_omp_mpi)"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpirun=(mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS=2 -np 2)
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

loop_time() { awk '$1 == "halo_omp_mpi" {print $2}'; }
estimate() {
  "$parmon" report --format json "$1" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["overhead"]["estimated_slowdown"])'
}

load0=$(cut -d' ' -f1 /proc/loadavg)
for r in $(seq "$rounds"); do
  "${mpirun[@]}" "$halo" "$iters" | loop_time >>"$tmp/plain"
  for mode in trace periodic; do
    "$parmon" record -q --mode "$mode" -o "$tmp/$mode.pmt" -- "${mpirun[@]}" "$halo" "$iters" |
      loop_time >>"$tmp/$mode"
    estimate "$tmp/$mode.pmt" >>"$tmp/$mode.estimate"
  done
done
load1=$(cut -d' ' -f1 /proc/loadavg)

plain=$(median <"$tmp/plain")
echo "overhead_bench: halo_omp_mpi, 2 ranks x 2 OpenMP threads, $iters iterations, $rounds interleaved rounds; load $load0 -> $load1, $(nproc) CPUs"
echo "plain loop: median $plain s (rounds: $(tr '\n' ' ' <"$tmp/plain"))"
for mode in trace periodic; do
  rec=$(median <"$tmp/$mode")
  est=$(median <"$tmp/$mode.estimate")
  target=$([ "$mode" = trace ] && echo 0.03 || echo 0.01)
  awk -v m="$mode" -v p="$plain" -v x="$rec" -v e="$est" -v t="$target" 'BEGIN {
    s = x / p - 1
    printf "%-8s loop median %.4f s: measured slowdown %+.1f%% (target <= %.0f%%: %s); report estimate %.1f%%",
           m, x, s * 100, t * 100, (s <= t) ? "met" : "NOT met", e * 100
    if (s > 0) printf " = %.2fx the measured (target within 1.5x: %s)\n", e / s, (e / s <= 1.5 && e / s >= 1 / 1.5) ? "met" : "NOT met"
    else printf " (no slowdown measured to compare with)\n"
  }'
  echo "         rounds: $(tr '\n' ' ' <"$tmp/$mode"); estimates: $(tr '\n' ' ' <"$tmp/$mode.estimate")"
done
