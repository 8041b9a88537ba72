#!/usr/bin/env bash
# The stress tests of tests/stress (issue 13) at bench size: the same programs, oracles and
# assertions, PARMON_STRESS_SCALE times longer or bigger, one test at a time. Prints each test's
# "[stress]" figures line (threads, processes, events, lost, recorder memory, wall time) and
# whether its assertions held.
#
#   bench/stress.sh [BUILD_DIR]      (default build/release; takes ~10-15 min on 2 cores)
#   STRESS_SCALES="threads=5 fork=5 flight=8 slow=2 many=2" bench/stress.sh   (the defaults)
#
# At the default scales: 5,000 threads in 100 waves of 50; 10,000 processes; a flight recorder
# run of 192 s; 2 x 2,000,000 events through a 1 MiB/s output in drop and block modes; 24
# recorders at once.
set -u
build=${1:-build/release}
bin="$build/bin/stress_e2e_test"
[ -x "$bin" ] || { echo "stress.sh: $bin is not built (cmake --build $build --target stress_e2e_test)" >&2; exit 2; }
scales=${STRESS_SCALES:-"threads=5 fork=5 flight=8 slow=2 many=2"}
declare -A filter=(
  [threads]=Stress.ThousandThreadsComeAndGo
  [fork]=Stress.ForkExecStormEveryProcessIsInTheTrace
  [flight]=Stress.FlightRecorderWrapsManyTimesWithMemoryFlat
  [slow]=Stress.FasterThanTheOutputDropCountsExactlyBlockLosesNothing
  [many]=Stress.ManyRecordersAtOnceDoNotInterfere
)
echo "machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
status=0
for item in $scales; do
  name=${item%%=*} scale=${item#*=}
  [ -n "${filter[$name]:-}" ] || { echo "stress.sh: unknown test '$name'" >&2; exit 2; }
  start=$(date +%s)
  out=$(PARMON_STRESS_SCALE=$scale "$bin" --gtest_filter="${filter[$name]}" 2>&1)
  rc=$?
  echo "$out" | grep '^\[stress\]'
  if [ $rc -eq 0 ]; then verdict=passed; else verdict=FAILED; status=1; fi
  echo "  $name (scale $scale): $verdict in $(( $(date +%s) - start )) s, load after: $(cut -d' ' -f1 /proc/loadavg)"
  [ $rc -eq 0 ] || echo "$out" | grep -E 'Failure|Expected|Which is|actual|error' | head -20
done
exit $status
