// MPI launches: `mpirun -np N parmon record -o RUN -- app` starts one recorder per rank. Each one
// finds its rank in the launcher's environment (Open MPI, PMI, PMIx, Slurm) and writes
// RUN/rank-<K>.ptrace, with string ids from a range of its own, so that readers merge the
// directory into one session (docs/comm.md). Also chooses the MPI wrapper library for the
// command's MPI ABI.
#ifndef PARMON_SRC_RECORDER_MPI_LAUNCH_H_
#define PARMON_SRC_RECORDER_MPI_LAUNCH_H_

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "recorder/recorder.h"

namespace parmon::recorder {

struct LaunchedRank {
  int rank = 0, size = 0;
  std::string launcher, job;
};

// The rank this recorder runs as, from the MPI launcher's environment; nullopt outside one.
std::optional<LaunchedRank> RankFromLauncher();
// Makes RUN a directory for the rank files; rank 0 removes files of ranks beyond this job's size
// left by an earlier, larger run. Returns the rank's file.
StatusOr<std::string> PrepareRankFile(const std::string& run, const LaunchedRank& r);
// Under an MPI launcher: points options->output at the rank's file, gives the rank its own
// string-id range and adds the rank's SESSION values. Nothing outside a launcher.
Status ApplyMpiLaunch(RecordOptions* options);
// libparmon_mpi.so or libparmon_mpi_mpich.so, for the MPI the command will use.
std::string MpiWrapperLibrary(const std::vector<std::string>& command);

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_MPI_LAUNCH_H_
