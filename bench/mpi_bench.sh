#!/usr/bin/env bash
# What `parmon record` adds to MPI calls end to end (issue 11, item 7; docs/mpi.md): bench/mpi_calls
# run plain and under the real `parmon record -- mpirun ...`: trace mode, periodic mode (no switch
# records, its default), trace mode --no-switches, periodic mode --switches, and trace mode with the
# recorder at the normal scheduling policy (PARMON_RECORDER_SCHED=normal: how it ran before it
# stepped aside as SCHED_BATCH) and trace mode with every switch record kept (--switch-budget none:
# how trace mode ran before its switch budget), interleaved round by round so every variant sees the same load. Two programs: a 0-byte ping-pong on 2 ranks (added ns per MPI call; targets
# <= 100 ns in trace mode, <= 50 ns in periodic mode) and an MPI_Barrier loop on 4 ranks (added
# share of a barrier; target <= 10%).
# usage: bench/mpi_bench.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
build=${1:-build/release}
rounds=${2:-5}
bin=$build/bin
parmon=$bin/parmon
calls=$bin/mpi_calls
[ -x "$calls" ] || { echo "mpi_bench: $calls not built (cmake --build $build --target mpi_calls)"; exit 2; }
[ -x "$parmon" ] || { echo "mpi_bench: $parmon not built"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpirun=(mpirun --allow-run-as-root --oversubscribe)
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
least() { sort -g | head -1; }

# $1 = variant, $2 = test, $3 = ranks: appends "<ns>" to $tmp/<test>.<variant>.
run() {
  local variant=$1 test=$2 np=$3 out
  case $variant in
    plain) out=$("${mpirun[@]}" -np "$np" "$calls" "$test") ;;
    trace) out=$("$parmon" record -q -o "$tmp/t.pmt" -- "${mpirun[@]}" -np "$np" "$calls" "$test") ;;
    periodic) out=$("$parmon" record -q --mode periodic -o "$tmp/t.pmt" -- "${mpirun[@]}" -np "$np" "$calls" "$test") ;;
    noswitch) out=$("$parmon" record -q --no-switches -o "$tmp/t.pmt" -- "${mpirun[@]}" -np "$np" "$calls" "$test") ;;
    periodic-switches) out=$("$parmon" record -q --mode periodic --switches -o "$tmp/t.pmt" -- "${mpirun[@]}" -np "$np" "$calls" "$test") ;;
    trace-normal) out=$(PARMON_RECORDER_SCHED=normal "$parmon" record -q -o "$tmp/t.pmt" -- "${mpirun[@]}" -np "$np" "$calls" "$test") ;;
    trace-nobudget) out=$("$parmon" record -q --switch-budget none -o "$tmp/t.pmt" -- "${mpirun[@]}" -np "$np" "$calls" "$test") ;;
  esac
  awk -v t="$test" '$1 == t {print $2}' <<<"$out" >>"$tmp/$test.$variant"
}

variants=(plain trace periodic noswitch periodic-switches trace-normal trace-nobudget)
load0=$(cut -d' ' -f1 /proc/loadavg)
for r in $(seq "$rounds"); do
  for v in "${variants[@]}"; do run "$v" pingpong 2; done
  for v in "${variants[@]}"; do run "$v" barrier 4; done
done
load1=$(cut -d' ' -f1 /proc/loadavg)

echo "mpi_bench: $rounds interleaved rounds, each figure the best of 5 blocks of a run; load $load0 -> $load1, $(nproc) CPUs"
printf "%-9s %-8s %-17s %10s %10s %10s %8s\n" test stat variant plain recorded added ratio
for test in pingpong barrier; do
  for stat in least median; do
    p=$($stat <"$tmp/$test.plain")
    for v in trace periodic noswitch periodic-switches trace-normal trace-nobudget; do
      x=$($stat <"$tmp/$test.$v")
      awk -v t="$test" -v s="$stat" -v v="$v" -v p="$p" -v x="$x" 'BEGIN {
        printf "%-9s %-8s %-17s %10.1f %10.1f %10.1f %7.2fx\n", t, s, v, p, x, x - p, x / p }'
    done
  done
done
# Targets on the median round: what a user sees in a typical run.
pp=$(median <"$tmp/pingpong.plain")
pt=$(median <"$tmp/pingpong.trace")
pr=$(median <"$tmp/pingpong.periodic")
bp=$(median <"$tmp/barrier.plain")
bt=$(median <"$tmp/barrier.trace")
br=$(median <"$tmp/barrier.periodic")
awk -v pp="$pp" -v pt="$pt" -v pr="$pr" -v bp="$bp" -v bt="$bt" -v br="$br" 'BEGIN {
  printf "target ping-pong, trace: +%.1f ns per MPI call (<= 100): %s\n", pt - pp, (pt - pp <= 100) ? "met" : "NOT met"
  printf "target ping-pong, periodic: +%.1f ns per MPI call (<= 50): %s\n", pr - pp, (pr - pp <= 50) ? "met" : "NOT met"
  printf "target barrier on 4 ranks, trace: +%.1f%% (<= 10%%): %s\n", (bt / bp - 1) * 100, (bt / bp <= 1.10) ? "met" : "NOT met"
  printf "target barrier on 4 ranks, periodic: +%.1f%% (<= 10%%): %s\n", (br / bp - 1) * 100, (br / bp <= 1.10) ? "met" : "NOT met"
}'
