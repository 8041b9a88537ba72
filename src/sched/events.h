// Building the scheduling events (src/format/kinds.h, 128-191) that the sampler and the
// context-switch recorder write.
#ifndef PARMON_SRC_SCHED_EVENTS_H_
#define PARMON_SRC_SCHED_EVENTS_H_

#include <cstdint>
#include <initializer_list>

#include "format/event.h"

namespace parmon::sched {

inline format::Event MakeEvent(format::Kind kind,
                               uint64_t ts,
                               std::initializer_list<uint64_t> args) {
  format::Event e;
  e.kind = static_cast<uint16_t>(kind);
  e.ts = ts;
  e.nargs = static_cast<uint8_t>(args.size());
  int i = 0;
  for (uint64_t a : args)
    e.args[i++] = a;
  return e;
}

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_EVENTS_H_
