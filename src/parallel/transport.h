// The MPI transport of the parallel report (docs/cluster.md, "Parallel report under MPI"): a C
// table of the few MPI calls the report makes, implemented by libparmon_report_mpi.so (built
// against the MPI CMake finds, mpi_transport.cc). `parmon` dlopens that library only when a
// launcher started it as one of several processes (OMPI_COMM_WORLD_SIZE or PMI_SIZE > 1), so
// the `parmon` binary itself does not depend on libmpi and runs where no MPI is installed.
#ifndef PARMON_SRC_PARALLEL_TRANSPORT_H_
#define PARMON_SRC_PARALLEL_TRANSPORT_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PARMON_TRANSPORT_VERSION 1

struct parmon_transport {
  int version;  // PARMON_TRANSPORT_VERSION
  // MPI_Init (once); this process's rank and the number of processes. 0 on success, else the
  // MPI error code.
  int (*init)(int* rank, int* size);
  // Nonblocking send and receive of up to `bytes` bytes (at most INT_MAX) to or from a rank, on
  // one tag: messages between two ranks arrive in the order they were sent. The request is
  // completed (and freed) by wait, which returns the bytes received (0 for a send), or -1 on
  // an error.
  void* (*isend)(const void* data, size_t bytes, int to);
  void* (*irecv)(void* data, size_t bytes, int from);
  long long (*wait)(void* request);
  // Cancels a receive that is still posted and frees it (nothing is left pending at MPI_Finalize).
  void (*cancel)(void* request);
  // MPI_Finalize.
  void (*finalize)(void);
  // MPI_Abort of every process with this exit code.
  void (*abort)(int code);
};

// The library's one exported symbol.
const struct parmon_transport* parmon_transport_table(void);
typedef const struct parmon_transport* (*parmon_transport_table_fn)(void);

#ifdef __cplusplus
}
#endif

#endif  // PARMON_SRC_PARALLEL_TRANSPORT_H_
