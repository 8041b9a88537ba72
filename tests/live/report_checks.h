// Checks of a live snapshot against the post-mortem report, shared by the live analysis tests:
// the final snapshot equals `parmon report --format json` field by field (ExpectSameReport), and a
// snapshot taken during the run is a prefix of the final report (ExpectPrefix).
#ifndef PARMON_TESTS_LIVE_REPORT_CHECKS_H_
#define PARMON_TESTS_LIVE_REPORT_CHECKS_H_

#include <string>

#include <nlohmann/json.hpp>

namespace parmon::testing {

// Every field equal; numbers inside per-interval rows (in_rows) within a few ns per fine interval.
void ExpectSameReport(const nlohmann::json& live,
                      const nlohmann::json& post,
                      const std::string& path,
                      bool in_rows);
// Nothing in snap exceeds fin, and each count is at least prev's (prev may be null).
void ExpectPrefix(const nlohmann::json& snap,
                  const nlohmann::json& prev,
                  const nlohmann::json& fin);

}  // namespace parmon::testing

#endif  // PARMON_TESTS_LIVE_REPORT_CHECKS_H_
