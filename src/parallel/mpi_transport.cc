// libparmon_report_mpi.so: the parallel report's transport (transport.h) over MPI. Linked with
// the MPI CMake finds (OpenMPI on Debian); loaded by `parmon report` only when it runs as one of
// several processes of an MPI launcher (src/parallel/parallel_report.cc).
#include <mpi.h>

#include <time.h>

#include <algorithm>
#include <climits>
#include <new>

#include "parallel/transport.h"

namespace {

constexpr int kTag = 19;  // issue 19: every message of the report uses one tag

int Init(int* rank, int* size) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided); rc != MPI_SUCCESS)
      return rc;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  return 0;
}

// A request of MPI_Isend or MPI_Irecv, started by start(count, request).
template <typename Start>
void* Post(size_t bytes, Start start) {
  if (bytes > INT_MAX)
    return nullptr;
  auto* r = new (std::nothrow) MPI_Request;
  if (r && start(static_cast<int>(bytes), r) != MPI_SUCCESS) {
    delete r;
    return nullptr;
  }
  return r;
}

void* Isend(const void* data, size_t bytes, int to) {
  return Post(bytes, [&](int n, MPI_Request* r) {
    return MPI_Isend(data, n, MPI_BYTE, to, kTag, MPI_COMM_WORLD, r);
  });
}

void* Irecv(void* data, size_t bytes, int from) {
  return Post(bytes, [&](int n, MPI_Request* r) {
    return MPI_Irecv(data, n, MPI_BYTE, from, kTag, MPI_COMM_WORLD, r);
  });
}

// MPI_Wait spins (OpenMPI polls its shared-memory queues): a process waiting for the other's
// next batch would take a core from it, and the report's processes share the machine's cores.
// So the wait tests and sleeps, from 20 us up to 1 ms: a batch takes milliseconds to fill.
long long Wait(void* request) {
  if (!request)
    return -1;
  auto* r = static_cast<MPI_Request*>(request);
  MPI_Status status;
  int done = 0, rc = MPI_SUCCESS;
  for (long sleep_ns = 20000; (rc = MPI_Test(r, &done, &status)) == MPI_SUCCESS && !done;
       sleep_ns = std::min(sleep_ns * 2, 1000000L)) {
    timespec ts = {0, sleep_ns};
    nanosleep(&ts, nullptr);
  }
  delete r;
  if (rc != MPI_SUCCESS)
    return -1;
  // (A send's status has no count: MPICH says MPI_UNDEFINED.)
  int count = 0;
  if (MPI_Get_count(&status, MPI_BYTE, &count) != MPI_SUCCESS || count < 0)
    count = 0;
  return count;
}

void Cancel(void* request) {
  if (!request)
    return;
  auto* r = static_cast<MPI_Request*>(request);
  MPI_Cancel(r);
  MPI_Wait(r, MPI_STATUS_IGNORE);
  delete r;
}

void Finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

void Abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
}

const parmon_transport kTable = {
    PARMON_TRANSPORT_VERSION, Init, Isend, Irecv, Wait, Cancel, Finalize, Abort};

}  // namespace

extern "C" __attribute__((visibility("default"))) const parmon_transport* parmon_transport_table() {
  return &kTable;
}
