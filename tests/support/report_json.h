// Lookups in `parmon report --format json` output (docs/report-json.md) shared by end-to-end
// tests: a location by its label or rank, and an MPI link of the communication matrix; and the
// figures MPI test programs print about themselves.
#ifndef PARMON_TESTS_SUPPORT_REPORT_JSON_H_
#define PARMON_TESTS_SUPPORT_REPORT_JSON_H_

#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace parmon::testing {

// The location labelled `label` ("rank 3", "rank 0 tid 42"), or null.
inline const nlohmann::json* LocationByLabel(const nlohmann::json& report,
                                             const std::string& label) {
  for (const auto& l : report["locations"])
    if (l["label"] == label)
      return &l;
  return nullptr;
}

// The main thread of MPI rank `rank`, or null.
inline const nlohmann::json* RankLocation(const nlohmann::json& report, int rank) {
  return LocationByLabel(report, "rank " + std::to_string(rank));
}

// The MPI link from rank `from` to rank `to`, or null.
inline const nlohmann::json* MpiLink(const nlohmann::json& report, int from, int to) {
  for (const auto& k : report["links"])
    if (k["kind"] == "mpi" && k["from"] == from && k["to"] == to)
      return &k;
  return nullptr;
}

// The "truth rank R key value key value ..." lines an MPI test program printed, by rank (other
// lines are skipped): what the program measured or counted itself.
inline std::map<int, std::map<std::string, double>> RankTruth(const std::string& out) {
  std::map<int, std::map<std::string, double>> t;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream w(line);
    std::string tag, what, key;
    int rank = -1;
    if (!(w >> tag >> what >> rank) || tag != "truth" || what != "rank")
      continue;
    for (double x; w >> key >> x;)
      t[rank][key] = x;
  }
  return t;
}

}  // namespace parmon::testing

#endif  // PARMON_TESTS_SUPPORT_REPORT_JSON_H_
