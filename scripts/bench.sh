echo "benchmarks: not written yet"
