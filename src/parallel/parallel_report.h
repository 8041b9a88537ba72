// The parallel report (`mpirun -np K parmon report RUN/`, docs/cluster.md): K processes started
// by an MPI launcher compute the report of one session together, and process 0 writes it.
//
// What is built: processes 1..K-1 each decode, clock-align and merge (model::Merge) their share
// of the session's streams (contiguous blocks of rank files, balanced by event count), and send
// their merged events in batches to process 0, which merges the K-1 time-ordered inputs and
// feeds the one analysis engine (analysis::Engine::Feed) in exactly the order of a single
// process's merge: the report is the same, byte for byte. Every process opens the session (its
// definitions, chunk index and clock alignment: the same on all). The analysis itself (message
// matching, wait states, the critical path, the diagnosis) runs on process 0 only: see
// docs/cluster.md for what that leaves out of the design.
//
// The MPI library is loaded at run time (transport.h), only when the environment says that a
// launcher started several processes; a single process (or K = 1) runs analysis::Analyze.
#ifndef PARMON_SRC_PARALLEL_PARALLEL_REPORT_H_
#define PARMON_SRC_PARALLEL_PARALLEL_REPORT_H_

#include <memory>
#include <string>

#include "analysis/engine.h"
#include "analysis/results.h"
#include "base/status.h"
#include "model/session.h"
#include "parallel/transport.h"

namespace parmon::parallel {

// The number of processes a launcher started and this one's rank among them, from the
// environment (OpenMPI's OMPI_COMM_WORLD_SIZE/RANK, MPICH's and Slurm's PMI_SIZE/RANK): 1 and 0
// when not started by one.
int LauncherSize();
int LauncherRank();

// The processes of one parallel report: MPI, initialised through libparmon_report_mpi.so.
class Group {
 public:
  // Loads the transport library from lib_dir (libparmon_report_mpi.so under OpenMPI's launcher,
  // libparmon_report_mpich.so under another; PARMON_REPORT_MPI_LIB names another) and
  // initialises MPI. An error says why in one sentence.
  static StatusOr<std::unique_ptr<Group>> Join(const std::string& lib_dir);
  ~Group();  // MPI_Finalize
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const parmon_transport& transport() const { return *t_; }
  // Ends every process (MPI_Abort): for an error one process meets and the others cannot know.
  [[noreturn]] void Abort(int code) const;

 private:
  Group() = default;
  void* lib_ = nullptr;
  const parmon_transport* t_ = nullptr;
  int rank_ = 0, size_ = 1;
};

// The session's report analysed by the group. Process 0 returns the Results, equal to
// analysis::Analyze(session, options); the others send their share and return empty Results.
// Every process must call it with the same session and options.
StatusOr<analysis::Results> Analyze(const Group& group,
                                    const model::Session& session,
                                    const analysis::Options& options);

}  // namespace parmon::parallel

#endif  // PARMON_SRC_PARALLEL_PARALLEL_REPORT_H_
