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
least() { sort -g | head -1; }
for r in $(seq "$rounds"); do
  "$bench" --threads "$threads" >>"$tmp/plain"
  "$parmon" record -q -o "$tmp/t.pmt" -- "$bench" --threads "$threads" >>"$tmp/recorded" 2>/dev/null
done
# On a machine others load, a round whose team was preempted costs tens of microseconds per
# region either way: the least-disturbed round (minimum) is the headline, the median beside it.
report() {  # $1 = min or median
  local f=$1
  pr=$(awk '{print $2}' "$tmp/plain" | $f)
  pb=$(awk '{print $4}' "$tmp/plain" | $f)
  rr=$(awk '{print $2}' "$tmp/recorded" | $f)
  rb=$(awk '{print $4}' "$tmp/recorded" | $f)
  awk -v pr="$pr" -v pb="$pb" -v rr="$rr" -v rb="$rb" -v f="$f" 'BEGIN {
    printf "%-7s %-16s %10.0f %10.0f %10.0f %15.2fx\n", f, "parallel region", pr, rr, rr - pr, (rr - pr) / pr
    printf "%-7s %-16s %10.0f %10.0f %10.0f %15.2fx\n", f, "barrier", pb, rb, rb - pb, (rb - pb) / pr
    if (f == "least")
      printf "target: added cost within 2x of the runtime'"'"'s own empty region (%.0f ns): %s\n", pr,
             ((rr - pr) <= 2 * pr && (rb - pb) <= 2 * pr) ? "met" : "NOT met"
  }'
}
echo "omp_bench: $threads threads, $rounds interleaved rounds (ns per region or barrier)"
printf "%-7s %-16s %10s %10s %10s %16s\n" "" "" "plain" "recorded" "added" "added/empty-rgn"
report median
report least
