// libparmon_mpi: the MPI wrappers, generated from the installed mpi.h by gen_mpi_wrappers.py at
// build time (mpi_wrappers.inc), around the hooks declared in mpi_core.h.
//
// Every MPI_Xxx the MPI declares is defined here with its exact prototype: it checks the guard
// and the enabled flag (pm::Begin), and when recording is off it calls PMPI_Xxx at once. The
// Fortran entry points (mpi_xxx_, mpi_xxx__, OpenMPI's ompi_xxx_f behind mpi_f08) convert handles
// and call the Fortran PMPI entry point pmpi_xxx_, so a Fortran call is recorded once, under the
// C name. PMPI symbols and MPI data symbols are weak references (mpi_weak.h): this library is
// preloaded into every process of the session, MPI or not, and only MPI programs call it.
#include <stddef.h>

#include "preload/common/preload.h"
#include "preload/mpi/mpi_core.h"

namespace pm = parmon::preload::mpi;

#include "mpi_wrappers.inc"

namespace parmon::preload::mpi {
const char* FunctionName(int fn) {
  return kFunctionNames[fn];
}
int FunctionCount() {
  return PARMON_MPI_FUNCTION_COUNT;
}
}  // namespace parmon::preload::mpi
