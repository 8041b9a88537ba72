// Reading an OTF2 archive back with Debian's python3-otf2 (otf2_summary.py), for the export
// tests.
#ifndef PARMON_TESTS_EXPORT_OTF2_READ_H_
#define PARMON_TESTS_EXPORT_OTF2_READ_H_

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "support/e2e.h"

namespace parmon::testing {

// otf2_summary.py's JSON for the archive in directory `archive` (an empty object on failure).
inline nlohmann::json Otf2Summary(const std::string& archive) {
  RunResult r = Run({"/usr/bin/python3", std::string(PARMON_EXPORT_TEST_DIR) + "/otf2_summary.py",
                     archive + "/traces.otf2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

inline bool HavePythonOtf2() {
  return Run({"/usr/bin/python3", "-c", "import otf2"}).exit_code == 0;
}

}  // namespace parmon::testing

#endif  // PARMON_TESTS_EXPORT_OTF2_READ_H_
