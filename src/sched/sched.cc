#include "sched/sched.h"

#include <fmt/format.h>

#include <charconv>
#include <memory>

#include "sched/sampler.h"
#include "sched/switches.h"

namespace parmon::sched {

void AddSchedSources(recorder::Recorder& recorder, const SchedOptions& options) {
  SamplerOptions so;
  so.period_ns = options.period_ns;
  so.only_tids = options.only_tids;
  so.attached = options.attached;
  // The sampler skips reading threads the switch records show did not change state.
  if (options.switches)
    so.activity = std::make_shared<SwitchActivity>();
  recorder.AddSource(std::make_unique<ProcSampler>(so));
  if (!options.switches)
    return;
  SwitchOptions wo;
  wo.activity = so.activity;
  wo.periodic = options.periodic;
  wo.period_ns = options.period_ns;
  wo.only_tids = options.only_tids;
  wo.attached = options.attached;
  recorder.AddSource(std::make_unique<SwitchRecorder>(wo));
}

bool ParseThreadList(const std::string& text, std::set<uint32_t>* out, std::string* error) {
  out->clear();
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos)
      comma = text.size();
    std::string_view item(text.data() + pos, comma - pos);
    uint32_t tid = 0;
    auto r = std::from_chars(item.data(), item.data() + item.size(), tid);
    if (item.empty() || r.ec != std::errc() || r.ptr != item.data() + item.size() || tid == 0) {
      *error =
          fmt::format("'{}' is not a thread id (give a comma-separated list such as 1234,1240)",
                      std::string(item));
      return false;
    }
    out->insert(tid);
    pos = comma + 1;
  }
  return true;
}

}  // namespace parmon::sched
