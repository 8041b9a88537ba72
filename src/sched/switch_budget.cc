#include "sched/switch_budget.h"

#include <algorithm>

namespace parmon::sched {

void SwitchBudget::Switch(uint64_t ts, uint32_t tid, bool out) {
  Advance(ts);
  ++records_;
  Track& t = tracks_[tid];
  Ran(t);
  t.on_cpu = !out;
}

void SwitchBudget::Exit(uint64_t ts, uint32_t tid) {
  Advance(ts);
  tracks_.erase(tid);
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
  // Threads on a CPU all through the window ran in it too, without a record.
  for (auto& [tid, t] : tracks_)
    if (t.on_cpu)
      Ran(t);
  BudgetWindow win;
  win.begin_ns = begin_;
  win.length_ns = end_ns - begin_;
  win.records = records_;
  win.threads = threads_;
  win.capacity_ns =
      win.length_ns * std::min<uint64_t>(threads_, std::max<uint32_t>(options_.cpus, 1));
  win.share = win.capacity_ns ? static_cast<double>(records_) * options_.cost_ns /
                                    static_cast<double>(win.capacity_ns)
                              : 0;
  max_share_ = std::max(max_share_, win.share);
  if (options_.share > 0 && win.share > options_.share && !exceeded_) {
    exceeded_ = true;
    over_ = win;
  }
  ++windows_;
  records_ = 0;
  threads_ = 0;
  begin_ = end_ns;
}

}  // namespace parmon::sched
