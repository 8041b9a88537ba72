#!/usr/bin/env bash
# Builds the release preset and runs every benchmark; each prints its headline figures, measured in
# the same run, next to what they are judged against.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
for b in build/release/bin/*_bench; do
  echo "== $b"
  "$b" --benchmark_min_time=0.2
done
