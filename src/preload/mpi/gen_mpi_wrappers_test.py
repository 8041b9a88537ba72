#!/usr/bin/env python3
"""Golden test of gen_mpi_wrappers.py on a small prototype list.

Runs the generator on testdata/mini_mpi.h (a hand-written stand-in for a preprocessed mpi.h:
blocking send and receive, Isend and Wait, a collective and its nonblocking form, a plain
Fortran-bindable call, const count arrays, functions without a Fortran binding, one the function
list does not name) with testdata/mini_functions.txt, and compares the wrappers, the weak-symbol
header and what the generator prints with the checked-in golden files (testdata/*.golden).

A change to the generator that changes its output on purpose: rerun with --update, read the
diff of the golden files, and commit them with the change.

Usage: gen_mpi_wrappers_test.py [--update]   (exit 0: same output; 1: a difference, shown)
"""
import difflib
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "testdata")
GOLDEN = {  # generator output -> golden file
    "wrappers.inc": "mini_wrappers.inc.golden",
    "weak.h": "mini_weak.h.golden",
    "stdout.txt": "mini_stdout.txt.golden",
}


def run_generator(out_dir):
    inc = os.path.join(out_dir, "wrappers.inc")
    weak = os.path.join(out_dir, "weak.h")
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "gen_mpi_wrappers.py"),
         os.path.join(DATA, "mini_mpi.h"), os.path.join(DATA, "mini_functions.txt"), inc, weak],
        capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("gen_mpi_wrappers.py failed (exit %d): %s" % (proc.returncode, proc.stderr))
    with open(os.path.join(out_dir, "stdout.txt"), "w") as f:
        f.write(proc.stdout)


def main():
    update = sys.argv[1:] == ["--update"]
    if sys.argv[1:] and not update:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as out_dir:
        run_generator(out_dir)
        failed = False
        for produced, golden in GOLDEN.items():
            with open(os.path.join(out_dir, produced)) as f:
                got = f.read()
            golden_path = os.path.join(DATA, golden)
            if update:
                with open(golden_path, "w") as f:
                    f.write(got)
                continue
            with open(golden_path) as f:
                want = f.read()
            if got != want:
                failed = True
                sys.stdout.writelines(difflib.unified_diff(
                    want.splitlines(True), got.splitlines(True), golden, produced))
        if failed:
            print("gen_mpi_wrappers.py output differs from the golden files (see above); if the "
                  "change is intended, run %s --update and commit the new golden files" %
                  os.path.basename(__file__))
            return 1
    print("gen_mpi_wrappers.py output matches %d golden files" % len(GOLDEN))
    return 0


if __name__ == "__main__":
    sys.exit(main())
