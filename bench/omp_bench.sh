#!/usr/bin/env bash
# OMPT overhead (issue 17, docs/openmp.md): bench/omp_bench (clang -fopenmp, LLVM's libomp) run
# alone and under `parmon record`, interleaved round by round so both see the same machine load;
# the medians give what recording adds per parallel region and per barrier, and its ratio to what
# the runtime itself costs for an empty region (target: the added cost within 2x of that).
# usage: bench/omp_bench.sh [BUILD_DIR] [ROUNDS] [THREADS]
set -euo pipefail
build=${1:-build/release}
rounds=${2:-7}
threads=${3:-2}
bin=$build/bin
parmon=$bin/parmon
bench=$bin/omp_bench
[ -x "$bench" ] || { echo "omp_bench: $bench not built (cmake --build $build --target omp_bench)"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for r in $(seq "$rounds"); do
  "$bench" --threads "$threads" >>"$tmp/plain"
  "$parmon" record -q -o "$tmp/t.pmt" -- "$bench" --threads "$threads" >>"$tmp/recorded"
done
pr=$(awk '{print $2}' "$tmp/plain" | median)
pb=$(awk '{print $4}' "$tmp/plain" | median)
rr=$(awk '{print $2}' "$tmp/recorded" | median)
rb=$(awk '{print $4}' "$tmp/recorded" | median)
awk -v pr="$pr" -v pb="$pb" -v rr="$rr" -v rb="$rb" -v t="$threads" -v n="$rounds" 'BEGIN {
  printf "omp_bench: %d threads, median of %d interleaved rounds (ns)\n", t, n
  printf "%-16s %10s %10s %10s %16s\n", "", "plain", "recorded", "added", "added/empty-rgn"
  printf "%-16s %10.0f %10.0f %10.0f %15.2fx\n", "parallel region", pr, rr, rr - pr, (rr - pr) / pr
  printf "%-16s %10.0f %10.0f %10.0f %15.2fx\n", "barrier", pb, rb, rb - pb, (rb - pb) / pr
  printf "target: added cost within 2x of the runtime'"'"'s own empty region (%.0f ns): %s\n", pr,
         ((rr - pr) <= 2 * pr && (rb - pb) <= 2 * pr) ? "met" : "NOT met"
}'
