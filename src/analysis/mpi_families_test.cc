// The MPI family table generated from src/preload/mpi/mpi_families.txt.
#include "analysis/mpi_families.h"

#include <gtest/gtest.h>

#include "analysis/engine.h"

namespace parmon::analysis {
namespace {

TEST(MpiFamilies, FromTheTable) {
  EXPECT_EQ(FindMpiFunction("MPI_Send").family, MpiFamilyId::kP2p);
  EXPECT_EQ(FindMpiFunction("MPI_Waitall").family, MpiFamilyId::kWait);
  EXPECT_EQ(FindMpiFunction("MPI_Allreduce").family, MpiFamilyId::kCollective);
  EXPECT_EQ(FindMpiFunction("MPI_Put").family, MpiFamilyId::kOneSided);
  EXPECT_EQ(FindMpiFunction("MPI_File_write_at").family, MpiFamilyId::kIo);
  EXPECT_EQ(FindMpiFunction("MPI_Init_thread").family, MpiFamilyId::kInit);
  EXPECT_EQ(FindMpiFunction("MPI_Comm_rank").family, MpiFamilyId::kOther);
  EXPECT_EQ(FindMpiFunction("PMPI_Recv").family, MpiFamilyId::kP2p);
  EXPECT_EQ(FindMpiFunction("not_mpi").family, MpiFamilyId::kOther);
}

TEST(MpiFamilies, NToNAndBarrierFlags) {
  EXPECT_TRUE(FindMpiFunction("MPI_Barrier").n_to_n);
  EXPECT_TRUE(FindMpiFunction("MPI_Barrier").barrier);
  EXPECT_TRUE(FindMpiFunction("MPI_Alltoallv").n_to_n);
  EXPECT_FALSE(FindMpiFunction("MPI_Allreduce").barrier);
  EXPECT_FALSE(FindMpiFunction("MPI_Bcast").n_to_n);
  EXPECT_FALSE(FindMpiFunction("MPI_Ibarrier").n_to_n);
}

TEST(MpiFamilies, NamesForReports) {
  EXPECT_EQ(MpiFamily("MPI_Get_accumulate"), "one-sided");
  EXPECT_EQ(MpiFamily("MPI_Ineighbor_alltoall"), "collective");
  EXPECT_TRUE(IsNToN("MPI_Reduce_scatter_block"));
}

}  // namespace
}  // namespace parmon::analysis
