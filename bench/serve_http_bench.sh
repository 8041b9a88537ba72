#!/bin/bash
# Does a browser indexing a big session through `parmon serve --http` slow the collector's
# intake? Rounds alternate: a session streamed with `parmon record --to` into a fresh collector
# alone (A), and the same while the HTTP side indexes a big stored session (B: its first
# /s/big/api/session request, sent just before). Per round: the recording's wall time, the time
# until the collector marks the stream ended (its sidecar), and for B how long the index took.
# The oracle for "nothing lost": the stored file equals the recorder's local copy.
#
# usage: bash bench/serve_http_bench.sh [BIN_DIR] [BIG_ITERATIONS] [SMALL_ITERATIONS] [ROUNDS]
set -euo pipefail
bin=${1:-build/release/bin}
big_iter=${2:-1000000}
small_iter=${3:-1000000}
rounds=${4:-2}
work=$(mktemp -d /tmp/parmon-serve-http-bench-XXXXXX)
trap 'kill $serve_pid 2>/dev/null || true; rm -rf "$work"' EXIT
store=$work/store
mkdir -p "$store"
"$bin/parmon" record -q -o "$store/big.ptrace" -- "$bin/threads_regions" 4 "$big_iter" >/dev/null
echo "big: $("$bin/parmon" info "$store/big.ptrace" | grep -m1 -E '^events|events' || true)" \
     "$(stat -c %s "$store/big.ptrace") bytes"
now() { date +%s.%N; }
for round in $(seq 1 "$rounds"); do
  for mode in A B; do
    rm -f "$store"/small*.ptrace "$store"/.streams/small*
    "$bin/parmon" serve --listen 127.0.0.1:0 --store "$store" --http 127.0.0.1:0 \
      >"$work/serve.out" 2>"$work/serve.err" &
    serve_pid=$!
    while [ "$(wc -l <"$work/serve.out")" -lt 2 ]; do sleep 0.05; done
    port=$(head -1 "$work/serve.out")
    url=$(sed -n 2p "$work/serve.out" | sed 's/^parmon serve: //')
    index_s=-
    if [ $mode = B ]; then
      ( t0=$(now); curl -s -o /dev/null "${url}s/big/api/session"; t1=$(now)
        echo "$t0 $t1" > "$work/index.time" ) &
      curl_pid=$!
      sleep 0.2
    fi
    t0=$(now)
    "$bin/parmon" record -q -o "$work/local.ptrace" --to "127.0.0.1:$port/small" -- \
      "$bin/threads_regions" 2 "$small_iter" >/dev/null
    t1=$(now)
    while ! grep -q '"ended":true' "$store/.streams/small.meta" 2>/dev/null; do sleep 0.01; done
    t2=$(now)
    same=no; cmp -s "$work/local.ptrace" "$store/small.ptrace" && same=yes
    events=$("$bin/parmon" info "$store/small.ptrace" | awk '/^events/ {print $2; exit}')
    if [ $mode = B ]; then
      wait $curl_pid
      read -r i0 i1 < "$work/index.time"
      index_s=$(echo "$i1 - $i0" | bc)
    fi
    rss=$(grep VmHWM /proc/$serve_pid/status | awk '{print $2}')
    kill $serve_pid; wait $serve_pid 2>/dev/null || true
    printf 'round %d %s: %s events, record %.2f s, collector ended %.2f s after start (%.1f M events/s), stored = local: %s, index of big %s s, collector peak RSS %d MiB, load %s\n' \
      "$round" "$mode" "$events" "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t0" | bc)" \
      "$(echo "$events / ($t2 - $t0) / 1000000" | bc -l)" "$same" "$index_s" \
      $((rss / 1024)) "$(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
