#!/usr/bin/env bash
# Builds parmon and runs the whole test suite: unit and end-to-end tests (release build) and the
# ring buffer tests under ThreadSanitizer. Installs what it needs first (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
bash scripts/build.sh tsan ring_test
echo "== ring buffer under ThreadSanitizer"
TSAN_OPTIONS="halt_on_error=1" build/tsan/bin/ring_test
echo "== test suite"
ctest --test-dir build/release --output-on-failure -j 2 --timeout 600
echo "== fuzzing: the regression inputs, then 30 s per target (scripts/fuzz.sh, docs/fuzzing.md)"
bash scripts/fuzz.sh 30
