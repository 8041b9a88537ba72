#!/usr/bin/env bash
# README's first command. Installs what parmon needs (Debian packages), builds it, records the
# ring-pipeline example -- the free-text retrieval farm of the Hathi-2 case study (seed 004), in
# its slow form with the master's logical error -- on 8 MPI ranks, and shows parmon's report with
# its diagnosis, then writes the HTML report. docs/examples.md says what to look for.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh release
out=${PARMON_DEMO_DIR:-build/demo}
mkdir -p "$out"
bin=build/release/bin
trace=$out/demo.ptrace
ranks=8

cat <<TEXT

== The example: a processor farm on a unidirectional ring of $ranks MPI ranks (Hathi-2, 1990)
Rank 0 hands out search words to rank 1; every worker passes each word on, searches its share
of the text and sends its answer along the ring, forwarding the answers of the workers before
it; the last worker's link goes back to rank 0. Links are synchronous (MPI_Ssend). In this slow
form the master waits for all answers to a word before it hands out the next one, so the ring
drains for every word and the workers queue up to send on their output links.

TEXT
run() { echo "\$ $*"; "$@"; }
run "$bin/parmon" record -q -o "$trace" -- \
  mpirun --allow-run-as-root --oversubscribe -np "$ranks" \
  "$bin/ring_search" --form slow --words 500 --db-kb 512
echo
run "$bin/parmon" report "$trace"
echo
run "$bin/parmon" report --format html -o "$out/demo.html" "$trace"
echo
echo "HTML report: $(cd "$out" && pwd)/demo.html"
echo "The same from an installed parmon: parmon demo"
