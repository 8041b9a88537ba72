#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz preset: clang, ASan, UBSan) and runs each one.
#   scripts/fuzz.sh                 # 30 s per target: the short run of the test suite
#   scripts/fuzz.sh 3600            # an hour per target (the long run, docs/fuzzing.md)
#   scripts/fuzz.sh 600 fuzz_cli    # one target
# Each target starts from its seed corpus (fuzz/corpus/<name>/: small real traces) and first
# replays every input in fuzz/regressions/<name>/ (inputs that once crashed parmon). New corpus
# entries go to build/fuzz/corpus/<name>/, never into the tree. Limits: 2 GiB of memory
# (-rss_limit_mb, allocations above 1 GiB fail as a finding: -malloc_limit_mb) and 60 s per input
# (-timeout): a run that passes shows no crash, hang or runaway allocation.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_trace fuzz_rank_dir fuzz_cli fuzz_stream)
bash scripts/build.sh fuzz "${targets[@]}"
status=0
for target in "${targets[@]}"; do
  name=${target#fuzz_}
  corpus=build/fuzz/corpus/$name
  mkdir -p "$corpus"
  flags=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=60 -close_fd_mask=2 -print_final_stats=1)
  if [ -d "fuzz/regressions/$name" ] && [ -n "$(ls -A "fuzz/regressions/$name")" ]; then
    echo "== $target: replaying fuzz/regressions/$name"
    if ! "build/fuzz/bin/$target" "${flags[@]}" fuzz/regressions/"$name"/*; then
      status=1
      continue
    fi
  fi
  echo "== $target: ${seconds} s from fuzz/corpus/$name"
  log=build/fuzz/$target.log
  rc=0
  "build/fuzz/bin/$target" "${flags[@]}" -max_total_time="$seconds" \
    -artifact_prefix="build/fuzz/$target-" "$corpus" "fuzz/corpus/$name" >"$log" 2>&1 || rc=$?
  grep -E "^(stat::|==[0-9]+==ERROR|SUMMARY|artifact_prefix)" "$log" || true
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "$log" >&2
    echo "fuzz.sh: $target found a failing input (build/fuzz/$target-*; log $log)" >&2
    status=1
  fi
done
exit $status
