#!/usr/bin/env bash
# Self-monitoring read cost (issue 17, docs/selfmon.md): bench/monitor_bench under the real
# `parmon record`, reading 64 watched threads' figures from the session's segment; prints ns per
# read next to its reference (the /proc reads a program would do itself) and the load average.
# usage: bench/monitor_bench.sh [BUILD_DIR] [THREADS] [READS]
set -euo pipefail
build=${1:-build/release}
threads=${2:-64}
reads=${3:-200000}
bin=$build/bin
[ -x "$bin/monitor_bench" ] || {
  echo "monitor_bench: $bin/monitor_bench not built (cmake --build $build --target monitor_bench)"
  exit 2
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
"$bin/parmon" record -q -o "$tmp/t.ptrace" -- "$bin/monitor_bench" "$threads" "$reads"
