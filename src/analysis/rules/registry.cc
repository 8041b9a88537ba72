// The diagnosis rules, in the order they run (rules.h).
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/rules/rules.h"
#include "analysis/units.h"

namespace parmon::analysis::rules {

const std::vector<Rule>& Registry() {
  static const std::vector<Rule> kRules = {
      {"crash", CrashRule},
      {"link-wait", LinkWaitRule},
      {"queued", QueuedRule},
      {"imbalance", ImbalanceRule},
      {"collective-wait", CollectiveWaitRule},
      {"lock-wait", LockWaitRule},
      {"io-wait", IoWaitRule},
      {"timer-wait", TimerWaitRule},
      {"cpu-bound", CpuBoundRule},
  };
  return kRules;
}

}  // namespace parmon::analysis::rules
