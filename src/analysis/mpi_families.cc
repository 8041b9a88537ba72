// The MPI family table (mpi_families.h): generated rows, looked up by binary search. The engine
// looks a function up once per function string id, so the lookup is off the per-event path.
#include "analysis/mpi_families.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "analysis/engine.h"

namespace parmon::analysis {
namespace {

constexpr MpiFunctionInfo kTable[] = {
#include "mpi_families.inc"
};

}  // namespace

const char* MpiFamilyName(MpiFamilyId f) {
  static const char* const kNames[kMpiFamilyCount] = {"p2p", "wait", "collective", "one-sided",
                                                      "io",  "init", "other"};
  return kNames[static_cast<int>(f)];
}

MpiFunctionInfo FindMpiFunction(std::string_view name) {
  std::string key;
  if (name.rfind("PMPI_", 0) == 0) {
    key = "MPI_";
    key += name.substr(5);
    name = key;
  }
  auto it =
      std::lower_bound(std::begin(kTable), std::end(kTable), name,
                       [](const MpiFunctionInfo& a, std::string_view n) { return a.name < n; });
  if (it != std::end(kTable) && it->name == name)
    return *it;
  return MpiFunctionInfo{};  // not an MPI function of the table: family "other"
}

std::string MpiFamily(const std::string& function) {
  return MpiFamilyName(FindMpiFunction(function).family);
}

bool IsNToN(const std::string& function) {
  return FindMpiFunction(function).n_to_n;
}

}  // namespace parmon::analysis
