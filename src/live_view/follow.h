// Following a trace that is still being written: the one piece `parmon dump --follow`,
// `parmon report --follow` and `parmon top` share. Everything here takes a local path (a trace
// file or a per-rank session directory) that may not exist yet and may still grow; a remote
// session is followed by fetching it into such a local file first (the collector's client), so
// HOST:PORT/SESSION plugs in front of these functions without changing them.
//
// Design: LiveTrace keeps one TraceReader open and calls Refresh() on it, which reads only the
// chunks appended since (format/reader.h); a consumer that walks events (dump) keeps one
// model::Merge over session() and calls it with the bound complete() says, so every event is
// handed out once, in the same order as after the run. A consumer of results (report, top) takes
// Analyze() after each refresh: a fresh Session over the same reader (its window and END values
// are those of now) analysed up to the time every stream is complete. That re-reads the events
// so far on every refresh (the engine's intervals are fixed by its window, so it cannot yet grow
// one window incrementally): the callers stretch their period when one analysis takes long.
// Once the recorder has written its END chunk and trailer (closed_cleanly()), the session is
// finished and the last analysis is the post-mortem one.
//
// A per-rank session directory gains files as ranks start and its reader cannot refresh, so it
// is opened again on every Refresh(); session() then changes and a Merge over it must be rebuilt
// (generation() says when).
#ifndef PARMON_SRC_LIVE_VIEW_FOLLOW_H_
#define PARMON_SRC_LIVE_VIEW_FOLLOW_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "analysis/engine.h"
#include "analysis/results.h"
#include "base/status.h"
#include "format/reader.h"
#include "model/session.h"

namespace parmon::live_view {

// What a follower reads: a local trace that may still grow, and whether what writes it is gone.
struct LiveSource {
  std::string path;  // a trace file or a per-rank session directory
  // True once whatever writes path has gone (a recorder child that exited, a fetch from a
  // collector that ended). Null: for a local trace file, its recorder's pid (from the session)
  // is watched once it opens; otherwise wait until the file is closed.
  std::function<bool()> writer_gone;
  // Why the writer is gone, when it failed (a remote fetch refused or cut): for messages.
  std::function<std::string()> why_gone;
  // Whatever feeds path (a fetch running on a thread), kept alive while the follower runs.
  std::shared_ptr<void> keep_alive;
  // What writes path knows when the recording is complete (a collector's store: every stream
  // ended and, per-rank, every rank of the world there; a fetch from a collector: the fetch
  // ended with every stream, every rank of the world, copied whole). Null: a trace closed
  // cleanly is complete (a per-rank directory: every file present closed, which may be before
  // the last rank started). Asked before each read, so what it vouches for is read.
  std::function<bool()> complete;
  // True once the follower gives up (its owner is closing): Open stops waiting. Null: only
  // StopRequested() stops it.
  std::function<bool()> stop;
};

// What the user named, as a source to follow: a local path as it is; a remote session
// (HOST:PORT/SESSION, live::IsRemoteSession) fetched from the collector into a private temporary
// file (or rank directory) that grows, with writer_gone saying when the fetch has ended.
StatusOr<LiveSource> ResolveLiveSource(const std::string& name);

class LiveTrace {
 public:
  // Opens source.path, waiting while it does not exist or holds less than a file header (the
  // recorder has not started writing it): polls every 50 ms until it opens, the writer is gone
  // (then an error saying nothing was written), a stop is requested, or an error that waiting
  // cannot cure.
  static StatusOr<std::unique_ptr<LiveTrace>> Open(LiveSource source);
  // ResolveLiveSource(name), then Open, with Ctrl-C ending the follow (StopOnInterrupt): what
  // `--follow NAME` opens.
  static StatusOr<std::unique_ptr<LiveTrace>> Follow(const std::string& name);
  // Reads what was appended since the last call.
  Status Refresh();
  // Nothing more will come: finished(), or the writer went without closing the trace
  // (abandoned(); a refresh after it went has read all it wrote).
  bool ended() const { return finished() || abandoned_; }
  bool abandoned() const { return abandoned_; }
  // One sentence on how the writer went when abandoned(): the recorder's pid for a local file,
  // the collector's refusal or cut for a remote one.
  std::string WhyAbandoned() const;

  const std::string& path() const { return path_; }
  const format::TraceReader& reader() const { return *reader_; }
  // The session over reader(): its streams grow with Refresh(), its window and END values are
  // those of the open (a Merge over it continues across refreshes of a single file).
  const model::Session& session() const { return *session_; }
  // Bumped when session() was replaced (a per-rank directory opened again).
  uint64_t generation() const { return generation_; }
  // The recorder closed the session (END chunk and trailer), and the source, when it can tell,
  // says the recording is complete: nothing more will come.
  bool finished() const { return reader_->closed_cleanly() && complete_; }
  // Every event at or before this time (session clock, inclusive) has been read: UINT64_MAX
  // once finished, nullopt when no stream is complete anywhere yet.
  std::optional<uint64_t> complete() const;
  // The bytes read so far (all files).
  uint64_t bytes() const;

  // Results of every event complete so far, as `parmon report` would compute them for a file
  // cut there (options' window clipped to it); once finished, the post-mortem analysis.
  StatusOr<analysis::Results> Analyze(analysis::Options options) const;

 private:
  LiveTrace() = default;
  Status OpenNow();
  // A local trace file with no writer_gone of its own: the recorder named in its session
  // (pid on this host) is watched, so a killed recorder ends the follow instead of leaving it
  // waiting (per-rank directories are not watched: each file has its own recorder).
  void WatchLocalRecorder();
  // A per-rank directory followed here, with no collector to say when the session is whole:
  // whether the reader has read a file of every rank of the world (their SESSION's mpi_size).
  // Without this, a rank whose file was not there yet, every file there being closed, read as
  // the end of the run.
  bool EveryRankRead() const;
  // A local per-rank directory whose files are all closed while some rank's never came, for
  // longer than the wait (20 s; PARMON_FOLLOW_RANK_WAIT seconds): the follow ends with what
  // there is (abandoned(), WhyAbandoned() says which ranks' files are there) instead of waiting
  // for ever.
  bool RanksNeverCame();

  LiveSource source_;
  std::string path_;
  bool directory_ = false;
  bool abandoned_ = false;
  bool complete_ = true;  // source_.complete's answer before the last read, and EveryRankRead()
  std::unique_ptr<format::TraceReader> reader_;
  std::unique_ptr<model::Session> session_;
  uint64_t generation_ = 0;
  uint64_t missing_since_ns_ = 0;  // RanksNeverCame: since when, with how many files
  uint32_t files_when_missing_ = 0;
  std::string ranks_missing_;
};

// Ctrl-C (SIGINT) and SIGTERM set a flag instead of killing the process, so that a follower
// restores the terminal and prints what it has; the second one kills as usual.
void StopOnInterrupt();
bool StopRequested();
void RequestStop();

// Sleeps up to ns, waking early when a stop is requested.
void SleepUnlessStopped(uint64_t ns);

}  // namespace parmon::live_view

#endif  // PARMON_SRC_LIVE_VIEW_FOLLOW_H_
