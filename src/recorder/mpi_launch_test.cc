// Which MPI wrapper library `parmon record -- PROGRAM` preloads: MPICH's for a program that needs
// libmpich (read from its dynamic section), Open MPI's otherwise, and Open MPI's for anything that
// is not a well-formed ELF program (a script, a truncated or damaged file).
#include "recorder/mpi_launch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "support/e2e.h"

namespace parmon::recorder {
namespace {

using parmon::testing::BinDir;

std::string Prog(const std::string& name) {
  return BinDir() + "/" + name;
}

// Writes the first n bytes of `from` to a scratch file; returns its path.
std::string Truncated(const std::string& from, size_t n, const std::string& name) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  bytes.resize(std::min(bytes.size(), n));
  const std::string path =
      (std::filesystem::temp_directory_path() / (name + "." + std::to_string(getpid()))).string();
  std::ofstream(path, std::ios::binary) << bytes;
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

TEST(MpiWrapperLibrary, ProgramsLinkedWithMpichGetMpichsWrappers) {
  if (access(Prog("mpi_patterns_mpich").c_str(), X_OK) != 0)
    GTEST_SKIP() << "MPICH is not installed";
  EXPECT_EQ(MpiWrapperLibrary({Prog("mpi_patterns_mpich")}), "libparmon_mpi_mpich.so");
  if (access(Prog("mpi_patterns_f_mpich").c_str(), X_OK) == 0) {  // needs libmpichfort only
    EXPECT_EQ(MpiWrapperLibrary({Prog("mpi_patterns_f_mpich"), "x"}), "libparmon_mpi_mpich.so");
  }
  EXPECT_EQ(MpiWrapperLibrary({"mpirun.mpich", "-np", "2", "x"}), "libparmon_mpi_mpich.so");
}

TEST(MpiWrapperLibrary, OtherProgramsGetOpenMpisWrappers) {
  EXPECT_EQ(MpiWrapperLibrary({Prog("mpi_patterns")}), "libparmon_mpi.so");
  EXPECT_EQ(MpiWrapperLibrary({"true"}), "libparmon_mpi.so");  // found in PATH
  EXPECT_EQ(MpiWrapperLibrary({"/no/such/program"}), "libparmon_mpi.so");
  EXPECT_EQ(MpiWrapperLibrary({}), "libparmon_mpi.so");
}

TEST(MpiWrapperLibrary, DamagedProgramsAreNotMistakenForMpichOnes) {
  const std::string full = Prog("mpi_patterns_mpich");
  if (access(full.c_str(), X_OK) != 0)
    GTEST_SKIP() << "MPICH is not installed";
  // Empty, cut inside the ELF header, inside the program headers: each is read as "no dynamic
  // section", never past the file's end.
  for (size_t n : {size_t{0}, size_t{10}, size_t{63}, size_t{100}, size_t{600}}) {
    const std::string cut = Truncated(full, n, "parmon-cut-program");
    EXPECT_EQ(MpiWrapperLibrary({cut}), "libparmon_mpi.so") << n << " bytes";
    std::filesystem::remove(cut);
  }
}

}  // namespace
}  // namespace parmon::recorder
