// The hand-written half of libparmon_mpi: what the generated wrappers (mpi_wrappers.inc) call.
//
// A wrapper runs pm::Begin (guard, enabled check, MpiEnter), the hooks for its family, the real
// PMPI function, more hooks, and pm::End (MpiError if it failed, MpiLeave). In periodic mode
// Begin/End only accumulate per-function counts and time in thread-local tables, and the hooks
// only count bytes and messages per peer; the tables are written as MpiStats/MpiPeerStats once
// per period by the thread that owns them.
//
// Shared state (communicators, requests, matched-probe messages) lives in fixed-size tables with
// atomic keys, so wrappers are safe under MPI_THREAD_MULTIPLE without taking locks on the hot
// path. Hooks get C values: the Fortran wrappers convert handles with PMPI_*_f2c first.
#ifndef PARMON_SRC_PRELOAD_MPI_MPI_CORE_H_
#define PARMON_SRC_PRELOAD_MPI_MPI_CORE_H_

#include <mpi.h>
#include <stdint.h>

#include "preload/common/preload.h"
#include "preload/mpi/mpi_weak.h"

namespace parmon::preload::mpi {

struct Call {
  uint64_t t0 = 0;  // entry time (ticks, skew applied)
  uint64_t t1 = 0;  // completion time, once a hook took it (MpiLeave reuses it); 0: not yet
  int fn = 0;       // index into the generated function table
  uint64_t bytes = 0;
  const void* site = nullptr;  // the program's return address: where it called
  bool timed = false;          // counted in the thread's MPI time (parmon_x_mpi_time)
};

// False when the call is only passed through (not recording, nested, paused). The check is
// inline in every generated wrapper, so a paused call costs no call into this library.
bool BeginRecording(Call* c, int fn);
// Always inlined into the wrapper, so that the return address is the one into the program.
[[gnu::always_inline]] inline bool Begin(Call* c, int fn) {
  if (t_in_wrapper != 0 || !Enabled())
    return false;
  c->site = __builtin_return_address(0);
  return BeginRecording(c, fn);
}
int End(Call* c, int rc);

void OnInit(Call& c, int rc);
void OnFinalize(Call& c);

// Point to point.
void OnSend(Call& c,
            int count,
            MPI_Datatype type,
            int dest,
            int tag,
            MPI_Comm comm,
            uint64_t request);
void OnNewSend(Call& c,
               MPI_Request req,
               int count,
               MPI_Datatype type,
               int dest,
               int tag,
               MPI_Comm comm,
               bool persistent);
void OnNewRecv(Call& c, MPI_Request req, MPI_Comm comm, bool persistent);
void OnRecvDone(Call& c, uint64_t posted, MPI_Comm comm, const MPI_Status* st, uint64_t request);
void OnStart(Call& c, MPI_Request req);
void OnStartAll(Call& c, int n, const MPI_Request* creqs, const MPI_Fint* freqs);
void OnMessage(MPI_Message msg, MPI_Comm comm);
MPI_Comm TakeMessage(MPI_Message msg);

constexpr int kFortranStatusInts = 16;  // >= MPI_STATUS_SIZE of OpenMPI (6) and MPICH (5)
bool FortranStatusIgnored(const void* fstatus);
const MPI_Status* CStatus(const MPI_Fint* fstatus);  // converted into thread-local storage

// Statuses for the *all/*some completion calls: the program's array, or ours when it passed
// MPI_STATUSES_IGNORE (so the wrapper can read sources and sizes).
class StatusArray {
 public:
  StatusArray(int n, void* program_array, bool fortran);
  ~StatusArray();
  void* arg() const { return arg_; }
  const MPI_Status* At(int i);  // status of entry i (converted for Fortran)

 private:
  void* arg_;
  bool fortran_;
  bool owned_;
  MPI_Status converted_;
  MPI_Status small_[8];
  MPI_Fint small_f_[8 * kFortranStatusInts];
};

// Snapshot of requests before a completion call, then what completed after it.
class Completion {
 public:
  Completion(int n, const MPI_Request* creqs, const MPI_Fint* freqs);
  ~Completion();
  void Done(Call& c, int i, const MPI_Status* st);
  void All(Call& c, StatusArray& sa);
  void Any(Call& c, int index, const MPI_Status* st, bool fortran);
  void Some(Call& c, int outcount, const int* indices, StatusArray& sa, bool fortran);
  void Freed(Call& c, int i);

  struct Entry;

 private:
  void DropDuplicates();

  int n_;
  Entry* entries_;
  Entry* small_;
  alignas(8) unsigned char storage_[8 * 48];
};

// Collectives: the shape says how bytes follow from the arguments (docs/events.md).
struct TypeArray {
  const MPI_Datatype* c;
  const MPI_Fint* f;
  MPI_Datatype At(int i) const { return c ? c[i] : PMPI_Type_f2c(f[i]); }
};
enum class Coll {
  k_barrier,
  k_bcast,
  k_reduce,
  k_allreduce,
  k_redscat_block,
  k_redscat,
  k_gather,
  k_scatter,
  k_allgather,
  k_alltoall,
  k_gatherv,
  k_scatterv,
  k_allgatherv,
  k_alltoallv,
  k_alltoallw,
  k_nb_allgather,
  k_nb_alltoall,
  k_nb_allgatherv,
  k_nb_alltoallv,
  k_nb_alltoallw
};
uint64_t NewCollRequest(Call& c, MPI_Request req);
void OnCollective(Call& c, Coll shape, uint64_t request, MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  int count,
                  MPI_Datatype type,
                  int root,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const void* sendbuf,
                  int count,
                  MPI_Datatype type,
                  int root,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const void* sendbuf,
                  int count,
                  MPI_Datatype type,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const void* sendbuf,
                  const int* counts,
                  MPI_Datatype type,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const void* sendbuf,
                  int scount,
                  MPI_Datatype stype,
                  int rcount,
                  MPI_Datatype rtype,
                  int root,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  int scount,
                  MPI_Datatype stype,
                  const void* recvbuf,
                  int rcount,
                  MPI_Datatype rtype,
                  int root,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const void* sendbuf,
                  int scount,
                  MPI_Datatype stype,
                  int rcount,
                  MPI_Datatype rtype,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const void* sendbuf,
                  int scount,
                  MPI_Datatype stype,
                  const int* rcounts,
                  MPI_Datatype rtype,
                  int root,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const int* scounts,
                  MPI_Datatype stype,
                  const void* recvbuf,
                  int rcount,
                  MPI_Datatype rtype,
                  int root,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const void* sendbuf,
                  int scount,
                  MPI_Datatype stype,
                  const int* rcounts,
                  MPI_Datatype rtype,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const void* sendbuf,
                  const int* scounts,
                  MPI_Datatype stype,
                  const int* rcounts,
                  MPI_Datatype rtype,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const void* sendbuf,
                  const int* scounts,
                  TypeArray stypes,
                  const int* rcounts,
                  TypeArray rtypes,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  int scount,
                  MPI_Datatype stype,
                  int rcount,
                  MPI_Datatype rtype,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  int scount,
                  MPI_Datatype stype,
                  const int* rcounts,
                  MPI_Datatype rtype,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const int* scounts,
                  MPI_Datatype stype,
                  const int* rcounts,
                  MPI_Datatype rtype,
                  MPI_Comm comm);
void OnCollective(Call& c,
                  Coll shape,
                  uint64_t request,
                  const int* scounts,
                  TypeArray stypes,
                  const int* rcounts,
                  TypeArray rtypes,
                  MPI_Comm comm);

void OnRma(Call& c, int count, MPI_Datatype type, int target, MPI_Win win);
void OnIo(Call& c, MPI_File file, int count, MPI_Datatype type);
void OnNewComm(MPI_Comm comm);
void OnCommFree(MPI_Comm comm);

}  // namespace parmon::preload::mpi

#endif  // PARMON_SRC_PRELOAD_MPI_MPI_CORE_H_
