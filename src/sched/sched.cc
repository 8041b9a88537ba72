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
  wo.budget = options.switch_budget;
  recorder.AddSource(std::make_unique<SwitchRecorder>(wo));
}

bool ParseSwitchBudget(const std::string& text, double* share, std::string* error) {
  if (text == "none" || text == "0" || text == "0%") {
    *share = 0;
    return true;
  }
  std::string_view number(text);
  if (!number.empty() && number.back() == '%')
    number.remove_suffix(1);
  double pct = 0;
  auto r = std::from_chars(number.data(), number.data() + number.size(), pct);
  if (number.empty() || r.ec != std::errc() || r.ptr != number.data() + number.size() ||
      !(pct >= 0) || pct > 100) {
    *error = fmt::format(
        "'{}' is not a share of the program's CPU from 0 to 100 percent (try 5, or none)", text);
    return false;
  }
  if (pct == 0) {
    *share = 0;
    return true;
  }
  if (pct < 0.01) {
    *error = fmt::format(
        "'{}' percent is below what the switch records can be measured to "
        "(0.01); give 0 or none to keep every record",
        text);
    return false;
  }
  *share = pct / 100;
  return true;
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
