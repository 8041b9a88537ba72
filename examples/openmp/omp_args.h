/* The command-line reading of the OpenMP example and benchmark (omp_imbalance.c,
 * bench/omp_bench.c): "--name value" pairs, numbers only. */
#ifndef PARMON_EXAMPLES_OPENMP_OMP_ARGS_H_
#define PARMON_EXAMPLES_OPENMP_OMP_ARGS_H_

#include <stdlib.h>
#include <string.h>

/* The value after `name` in argv, or fallback when it is not there. */
static inline long OmpArg(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (strcmp(argv[i], name) == 0)
      return atol(argv[i + 1]);
  return fallback;
}

#endif /* PARMON_EXAMPLES_OPENMP_OMP_ARGS_H_ */
