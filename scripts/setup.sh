#!/usr/bin/env bash
# Installs what parmon needs to build and test on Debian 12. Idempotent and quick when all is present.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libzstd-dev libfmt-dev libcli11-dev
      nlohmann-json3-dev libgtest-dev libbenchmark-dev openmpi-bin libopenmpi-dev gfortran
      libseccomp-dev linux-perf python3 mpich libmpich-dev
      libopen-trace-format2-dev otf2-tools python3-otf2 libdw-dev
      libprotobuf-dev protobuf-compiler libboost1.81-dev
      tmux libomp-dev clang iproute2 pigz libabsl-dev)
# OTF2 (`parmon export --format otf2`) links Debian's libotf2; its tests read archives back with
# otf2-print and the python3-otf2 bindings. Perfetto export (`--format perfetto`) writes its
# protobuf with Debian's libprotobuf (protoc generates the code). The collector (`parmon serve`)
# and `record --to` use Boost.Asio (header-only) from libboost1.81-dev. `parmon top`'s terminal
# test runs it in tmux (send-keys, capture-pane).
# The report engine's per-message hash tables are Abseil's flat_hash_map (libabsl-dev).
# `parmon report` resolves MPI call sites to file and line with elfutils' libdw (libdw-dev).
# OpenMP (docs/openmp.md): libomp-dev gives LLVM's libomp and OMPT's header omp-tools.h; clang
# builds examples/openmp against it.
# iproute2's `ip` makes the network namespaces (hosts, a bridge, veth pairs) of the multi-host
# test (tests/cluster).
# pigz: the report's end-to-end golden of a real multi-threaded program ("CPU-bound on 2 CPUs").
# MPICH sits next to OpenMPI (the default mpicc/mpirun stay OpenMPI's, which has the higher
# alternatives priority); parmon's MPICH wrappers and tests use mpicc.mpich/mpirun.mpich.
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "parmon setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# npm fetches the HTML report's charting library at configure time (web/package-lock.json); a
# Node.js from elsewhere brings its own npm, so only install Debian's when there is none.
if ! command -v npm >/dev/null 2>&1; then
  echo "parmon setup: installing npm (charts in HTML reports)"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq npm >/dev/null ||
    echo "parmon setup: npm could not be installed; HTML reports will have no charts"
fi
# The HTML report's browser test (tests/html) opens reports in Debian's chromium, headless.
# Without recommends: the browser and its fonts, not the desktop it would bring along.
if ! command -v chromium >/dev/null 2>&1; then
  echo "parmon setup: installing chromium (the HTML report's browser test)"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    chromium fonts-liberation >/dev/null
fi
