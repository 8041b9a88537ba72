#include "common/mpi_example.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace parmon_examples {

MpiSetup StartMpi(int* argc, char*** argv, const char* program, int min_ranks, Location* me) {
  MpiSetup s;
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.size);
  if (s.size < min_ranks) {
    if (s.rank == 0)
      fprintf(stderr, "%s: needs at least %d MPI ranks, got %d (run it with mpirun -np %d)\n",
              program, min_ranks, s.size, min_ranks);
    MPI_Finalize();
    exit(2);
  }
  me->rank = s.rank;
  me->thread = "rank-" + std::to_string(s.rank);
  parmon_thread_name(me->thread.c_str());
  return s;
}

void Send(Location& me, const void* buf, int bytes, int dest, int tag) {
  MPI_Send(buf, bytes, MPI_BYTE, dest, tag, MPI_COMM_WORLD);
  me.CountSend(dest, static_cast<uint64_t>(bytes));
}

void Ssend(Location& me, const void* buf, int bytes, int dest, int tag) {
  MPI_Ssend(buf, bytes, MPI_BYTE, dest, tag, MPI_COMM_WORLD);
  me.CountSend(dest, static_cast<uint64_t>(bytes));
}

void CountReceived(Location& me, const MPI_Status& status) {
  int bytes = 0;
  MPI_Get_count(&status, MPI_BYTE, &bytes);
  me.CountReceive(status.MPI_SOURCE, static_cast<uint64_t>(bytes));
}

int Recv(Location& me, void* buf, int bytes, int source, int tag, MPI_Status* status) {
  MPI_Status local;
  MPI_Status* st = status ? status : &local;
  MPI_Recv(buf, bytes, MPI_BYTE, source, tag, MPI_COMM_WORLD, st);
  CountReceived(me, *st);
  int got = 0;
  MPI_Get_count(st, MPI_BYTE, &got);
  return got;
}

int FinishMpi(Report& report, Location& me, bool ok, const std::string& path) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // The three collectives below are counted before the counts are serialised.
  ++me.collectives["MPI_Allreduce"];
  ++me.collectives["MPI_Gather"];
  ++me.collectives["MPI_Gatherv"];
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);

  std::string text = me.ToJson().dump();
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(rank == 0 ? size : 0), offsets(rank == 0 ? size : 0);
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string gathered;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) {
      offsets[r] = total;
      total += lengths[r];
    }
    gathered.resize(static_cast<size_t>(total));
  }
  MPI_Gatherv(text.data(), length, MPI_CHAR, gathered.data(), lengths.data(), offsets.data(),
              MPI_CHAR, 0, MPI_COMM_WORLD);
  bool written = true;
  if (rank == 0) {
    report.ok = all != 0;
    report.locations.clear();
    for (int r = 0; r < size; ++r)
      report.locations.push_back(nlohmann::json::parse(
          gathered.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(lengths[r]))));
    written = report.Write(path);
    if (!report.ok)
      fprintf(stderr, "%s: self-check FAILED\n", report.example.c_str());
  }
  MPI_Finalize();
  return all != 0 && written ? 0 : 1;
}

}  // namespace parmon_examples
