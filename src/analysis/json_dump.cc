#include "analysis/json_dump.h"

#include <utility>

#include "base/utf8.h"

namespace parmon::analysis {
namespace {

bool AllUtf8(const nlohmann::json& j) {
  if (j.is_string())
    return IsValidUtf8(j.get_ref<const std::string&>());
  if (j.is_object()) {
    for (const auto& [key, value] : j.items())
      if (!IsValidUtf8(key) || !AllUtf8(value))
        return false;
    return true;
  }
  if (j.is_array()) {
    for (const auto& value : j)
      if (!AllUtf8(value))
        return false;
  }
  return true;
}

nlohmann::json Escaped(const nlohmann::json& j) {
  if (j.is_string())
    return ValidUtf8(j.get_ref<const std::string&>());
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, value] : j.items())
      out[ValidUtf8(key)] = Escaped(value);
    return out;
  }
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& value : j)
      out.push_back(Escaped(value));
    return out;
  }
  return j;
}

}  // namespace

std::string DumpJson(const nlohmann::json& j, int indent) {
  // The walk costs far less than the dump; the copy is made only for a value that needs it.
  if (AllUtf8(j))
    return j.dump(indent);
  return Escaped(j).dump(indent);
}

}  // namespace parmon::analysis
