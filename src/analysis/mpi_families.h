// MPI function families, from the wrapper generator's table (src/preload/mpi/mpi_families.txt,
// turned into mpi_families.inc by gen_mpi_wrappers.py --families at build time): which functions
// move point-to-point messages, complete requests, are collectives (and of those, the N-to-N
// ones where every member waits for the last to arrive), one-sided, file I/O, start-up and
// shut-down. The analysis never guesses a family from a function's name.
#ifndef PARMON_SRC_ANALYSIS_MPI_FAMILIES_H_
#define PARMON_SRC_ANALYSIS_MPI_FAMILIES_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace parmon::analysis {

enum class MpiFamilyId : uint8_t { kP2p, kWait, kCollective, kOneSided, kIo, kInit, kOther };
constexpr int kMpiFamilyCount = 7;
// "p2p", "wait", "collective", "one-sided", "io", "init", "other": how reports name it.
const char* MpiFamilyName(MpiFamilyId f);

struct MpiFunctionInfo {
  std::string_view name;  // "MPI_Send"
  MpiFamilyId family = MpiFamilyId::kOther;
  bool n_to_n = false;   // a collective where every member waits for the last to arrive
  bool barrier = false;  // MPI_Barrier
};

// A function as the analysis keeps it (by string id): its name and the table's entry.
struct MpiFunc {
  std::string name;
  MpiFamilyId family = MpiFamilyId::kOther;
  bool n_to_n = false;
  bool barrier = false;
};

// The table's entry for an MPI function ("MPI_Send"; "PMPI_Send" is the same function), or a
// family-"other" entry for a name the table does not hold.
MpiFunctionInfo FindMpiFunction(std::string_view name);

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_MPI_FAMILIES_H_
