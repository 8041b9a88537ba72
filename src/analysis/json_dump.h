// JSON text of a value whose strings may hold any bytes (program names, arguments, file paths
// taken from a trace). nlohmann::json::dump throws on a string that is not UTF-8; DumpJson writes
// such strings, and object keys, through ValidUtf8 (stray bytes as `\xNN`) so every JSON output
// of parmon is well-formed and keeps every byte readable.
#ifndef PARMON_SRC_ANALYSIS_JSON_DUMP_H_
#define PARMON_SRC_ANALYSIS_JSON_DUMP_H_

#include <nlohmann/json.hpp>

#include <string>

namespace parmon::analysis {

// j.dump(indent), with strings that are not UTF-8 escaped first (see base/utf8.h).
std::string DumpJson(const nlohmann::json& j, int indent = -1);

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_JSON_DUMP_H_
