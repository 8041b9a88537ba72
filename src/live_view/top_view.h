// Renders a top Frame as one screen of text: a header (command, time covered, events, lost,
// paused), the thread table with each thread's state split of the last interval as a bar, CPU
// utilisation per CPU, the busiest links and the live findings, and a key help line. The same
// renderer writes --batch output (no colour, no height limit, no key line), so what a test reads
// from `parmon top --batch` is what the terminal shows.
#ifndef PARMON_SRC_LIVE_VIEW_TOP_VIEW_H_
#define PARMON_SRC_LIVE_VIEW_TOP_VIEW_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "live_view/top_model.h"

namespace parmon::live_view {

enum class SortBy { kNatural, kBusy, kWait, kName };
const char* SortName(SortBy s);

// What the keys change.
struct ViewState {
  SortBy sort = SortBy::kNatural;
  size_t cursor = 0;                 // index in the visible thread list
  size_t scroll = 0;                 // first thread row shown
  std::optional<uint32_t> only_pid;  // 't': only this process
  bool paused = false;
  uint64_t period_ns = 1'000'000'000;
  std::string message;  // one line under the header (what a key did)
};

struct RenderOptions {
  int rows = 0;    // 0: no limit (batch)
  int cols = 120;  // 0: no limit (lines are not cut)
  bool color = false;
  bool batch = false;
};

// The thread rows in the order and filter of the view (indexes into frame.threads).
std::vector<size_t> VisibleThreads(const Frame& frame, const ViewState& view);
// How many thread rows fit on a screen of options.rows (0 in batch: all).
int ThreadRows(const Frame& frame, const ViewState& view, const RenderOptions& options);
std::string Render(const Frame& frame, const ViewState& view, const RenderOptions& options);

}  // namespace parmon::live_view

#endif  // PARMON_SRC_LIVE_VIEW_TOP_VIEW_H_
