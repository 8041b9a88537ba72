#!/usr/bin/env bash
# Installs what parmon needs, builds it, records a bundled parallel example and shows the result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
out=${PARMON_DEMO_DIR:-build/demo}
mkdir -p "$out"
bin=build/release/bin
echo "== parmon record -o $out/demo.ptrace -- $bin/threads_regions 4 200000"
"$bin/parmon" record -o "$out/demo.ptrace" -- "$bin/threads_regions" 4 200000
echo "== parmon info $out/demo.ptrace"
"$bin/parmon" info "$out/demo.ptrace"
