// MPI helpers shared by the MPI examples: point-to-point calls that also count, in the calling
// rank's Location, the messages and bytes they move (peer = world rank; every example works in
// MPI_COMM_WORLD), and the end of a run, where rank 0 gathers every rank's counts and writes the
// side file.
#ifndef PARMON_EXAMPLES_COMMON_MPI_EXAMPLE_H_
#define PARMON_EXAMPLES_COMMON_MPI_EXAMPLE_H_

#include <mpi.h>

#include <string>

#include "common/example.h"

namespace parmon_examples {

// MPI_Init plus the usual setup: the rank and size, and the main thread named "rank-<r>" (the
// name the tests find the rank's location by). Exits with a clear message when the job has fewer
// than `min_ranks` ranks.
struct MpiSetup {
  int rank = 0;
  int size = 1;
};
MpiSetup StartMpi(int* argc, char*** argv, const char* program, int min_ranks, Location* me);

void Send(Location& me, const void* buf, int bytes, int dest, int tag);
// A synchronous send: returns once the receiver has started to take the message, like an occam
// channel or a transputer link (so time spent in it is time the link waits for its receiver).
void Ssend(Location& me, const void* buf, int bytes, int dest, int tag);
// Receives at most `bytes` into buf; source and tag may be MPI_ANY_*. Returns the byte count.
int Recv(Location& me, void* buf, int bytes, int source, int tag, MPI_Status* status = nullptr);
// Counts a nonblocking receive that completed with `status`.
void CountReceived(Location& me, const MPI_Status& status);

// Ends the run: every rank's verdict is combined (the run is ok only if every rank's is), rank 0
// writes the report with every rank's location to `path`, and MPI is finalised. Returns the exit
// status for main: 0 when the combined verdict is ok, 1 otherwise.
int FinishMpi(Report& report, Location& me, bool ok, const std::string& path);

}  // namespace parmon_examples

#endif  // PARMON_EXAMPLES_COMMON_MPI_EXAMPLE_H_
