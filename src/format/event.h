// A decoded event: what the reader hands to every consumer and what the recorder encodes.
#ifndef PARMON_SRC_FORMAT_EVENT_H_
#define PARMON_SRC_FORMAT_EVENT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "format/kinds.h"

namespace parmon::format {

struct Event {
  uint64_t ts = 0;        // ns of the session clock
  uint32_t location = 0;  // DefLocation id; 0 for definitions and session-wide events
  uint16_t kind = 0;      // format::Kind
  Source source = Source::kRuntime;
  uint8_t nargs = 0;
  uint64_t args[kMaxArgs] = {};
  std::string_view payload;  // points into the reader's (or caller's) buffer

  Kind kind_enum() const { return static_cast<Kind>(kind); }
};

// Renders an event as one line of text (used by `parmon dump` and in test failure messages).
std::string DescribeEvent(const Event& e);

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_EVENT_H_
