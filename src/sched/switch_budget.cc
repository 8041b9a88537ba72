#include "sched/switch_budget.h"

namespace parmon::sched {

void SwitchBudget::Switch(uint64_t ts, uint32_t tid, bool out) {
  Advance(ts);
  ++records_;
  auto [it, first] = tracks_.try_emplace(tid);
  Track& t = it->second;
  if (out) {
    // On a CPU since its switch-in; first seen switching out: since before the window began.
    if (t.on_cpu || first)
      cpu_ns_ += RanUntil(t.in_ts, ts);
    t.on_cpu = false;
  } else {
    if (t.on_cpu)  // its switch-out was lost: it ran until now at least
      cpu_ns_ += RanUntil(t.in_ts, ts);
    t.on_cpu = true;
    t.in_ts = ts;
  }
}

void SwitchBudget::Exit(uint64_t ts, uint32_t tid) {
  Advance(ts);
  auto it = tracks_.find(tid);
  if (it == tracks_.end())
    return;
  if (it->second.on_cpu)
    cpu_ns_ += RanUntil(it->second.in_ts, ts);
  tracks_.erase(it);
}

void SwitchBudget::Advance(uint64_t ts) {
  const uint64_t w = std::max<uint64_t>(options_.window_ns, 1);
  if (begin_ == 0) {
    begin_ = std::max<uint64_t>(ts, 1);
    return;
  }
  if (ts < begin_ + w)
    return;
  Close(begin_ + w);
  // A quiet stretch of whole windows has no record to cost anything: the next window starts at
  // the one that holds ts.
  if (ts >= begin_ + w)
    begin_ += (ts - begin_) / w * w;
}

void SwitchBudget::Close(uint64_t end_ns) {
  // Threads still on a CPU ran to the window's end.
  for (const auto& [tid, t] : tracks_)
    if (t.on_cpu)
      cpu_ns_ += RanUntil(t.in_ts, end_ns);
  BudgetWindow win;
  win.begin_ns = begin_;
  win.length_ns = end_ns - begin_;
  win.records = records_;
  win.cpu_ns = std::max(cpu_ns_, win.length_ns);
  win.share = win.cpu_ns ? static_cast<double>(records_) * options_.cost_ns /
                               static_cast<double>(win.cpu_ns)
                         : 0;
  max_share_ = std::max(max_share_, win.share);
  if (options_.share > 0 && win.share > options_.share && !exceeded_) {
    exceeded_ = true;
    over_ = win;
  }
  ++windows_;
  records_ = 0;
  cpu_ns_ = 0;
  begin_ = end_ns;
}

}  // namespace parmon::sched
