#!/usr/bin/env bash
# `cmake --install` into a scratch prefix, then build programs against the installed parmon the
# three documented ways -- C with pkg-config, C++ with find_package(parmon), Fortran with the
# module -- and record each with the installed `parmon record`: every region must be recorded.
# Usage: install_test.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name libparmon.so | head -1)")
test -x "$prefix/bin/parmon"
test -f "$prefix/include/parmon/parmon.h"

check_regions() {  # trace expected_enter_count
  local n
  n=$("$prefix/bin/parmon" dump "$1" | grep -c "RegionEnter loop" || true)
  if [ "$n" != "$2" ]; then
    echo "FAIL: $1 has $n RegionEnter events, expected $2"
    exit 1
  fi
}

# C, pkg-config.
cat > "$work/c.c" <<'C'
#include <parmon/parmon.h>
int main(void) {
  parmon_id r = parmon_region_register("loop");
  for (int i = 0; i < 1000; ++i) { parmon_region_enter(r); parmon_region_leave(r); }
  return 0;
}
C
flags=$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs parmon)
cc "$work/c.c" $flags -Wl,-rpath,"$libdir" -o "$work/c_prog"
"$work/c_prog"  # runs without parmon
"$prefix/bin/parmon" record -q -o "$work/c.ptrace" -- "$work/c_prog"
check_regions "$work/c.ptrace" 1000

# C++, CMake package.
mkdir -p "$work/cxx"
cat > "$work/cxx/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer CXX)
find_package(parmon REQUIRED)
add_executable(cxx_prog main.cc)
target_compile_features(cxx_prog PRIVATE cxx_std_17)
target_link_libraries(cxx_prog PRIVATE parmon::parmon)
CM
cat > "$work/cxx/main.cc" <<'CC'
#include <parmon/parmon.hpp>
int main() {
  for (int i = 0; i < 500; ++i) { PARMON_SCOPE("loop"); }
  return 0;
}
CC
cmake -S "$work/cxx" -B "$work/cxx/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_RPATH="$libdir" >/dev/null
cmake --build "$work/cxx/build" >/dev/null
"$prefix/bin/parmon" record -q -o "$work/cxx.ptrace" -- "$work/cxx/build/cxx_prog"
check_regions "$work/cxx.ptrace" 500

# Fortran, the module.
if command -v gfortran >/dev/null; then
  cat > "$work/f.f90" <<'F'
program f
  use parmon
  implicit none
  integer(c_int32_t) :: r
  integer :: i
  r = parmon_region_register("loop"//c_null_char)
  do i = 1, 250
    call parmon_region_enter(r)
    call parmon_region_leave(r)
  end do
end program f
F
  (cd "$work" && gfortran -c "$prefix/include/parmon/parmon.f90" && \
   gfortran f.f90 parmon.o -L"$libdir" -lparmon -Wl,-rpath,"$libdir" -o f_prog)
  "$prefix/bin/parmon" record -q -o "$work/f.ptrace" -- "$work/f_prog"
  check_regions "$work/f.ptrace" 250
fi
echo "install test: C, C++ and Fortran programs built against the installed parmon and recorded"
