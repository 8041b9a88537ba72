// `parmon top`: the live view of a trace that is being written, refreshed every period. Each
// refresh reads the chunks the recorder appended (LiveTrace), analyses what every stream has
// complete (a snapshot, the same analysis as `parmon report`), turns the difference from the last
// snapshot into the last interval's figures (TopModel) and draws them (top_view.h) on the
// terminal, or prints them as plain text in --batch mode.
//
// RunTop is the entry point for any source of a growing local trace: the CLI passes a file or a
// recording it started; a remote session (HOST:PORT/SESSION) is fetched into a local file that
// grows (ResolveLiveSource, follow.h), and that file is passed here with writer_gone telling
// when the fetch has ended.
#ifndef PARMON_SRC_LIVE_VIEW_TOP_H_
#define PARMON_SRC_LIVE_VIEW_TOP_H_

#include <cstdint>
#include <functional>
#include <string>

#include "analysis/engine.h"
#include "base/status.h"
#include "live_view/follow.h"

namespace parmon::live_view {

struct TopOptions {
  uint64_t period_ns = 1'000'000'000;
  // Plain text on standard output, one screen per refresh, no keys (like top -b); also chosen
  // when standard input or output is not a terminal.
  bool batch = false;
  // Batch: stop after this many refreshes (0: when the session ends).
  uint64_t iterations = 0;
  bool color = true;
  analysis::Options analysis;  // the window and interval of the snapshots
  // The 'p' key pauses the display; with this hook it also pauses (true) or resumes (false) the
  // recording through the control path, and its status is shown in one line.
  std::function<Status(bool pause)> on_pause;
};

// Follows source.path (a file or per-rank session directory, which may not exist yet and may
// still be written; follow.h) until the user quits (q, Ctrl-C), or in batch mode until the
// session ends (closed, or its writer gone) or `iterations` refreshes. Returns the exit status:
// 0, or 1 after saying why on stderr.
int RunTop(const LiveSource& source, const TopOptions& options);
// A session on a collector (HOST:PORT/SESSION) whose live analysis answers each refresh (QUERY,
// docs/live.md): nothing is fetched or analysed here.
int RunTopRemote(const std::string& name, const TopOptions& options);

}  // namespace parmon::live_view

#endif  // PARMON_SRC_LIVE_VIEW_TOP_H_
