// The collector's live analysis (docs/live.md, "Live analysis"): per live session, the analysis
// engine fed by the session's chunks as the store receives them, and snapshots of it for
// consumers (the QUERY frame).
//
// One worker thread does all of it, so the io_context never analyses: the io thread only marks a
// session as having new bytes (Touch) or queues a question (Ask), both O(1) under a mutex. The
// worker reads what the store file gained (format::TraceReader::Refresh, the session's
// model::Session::Refresh), and feeds the events every stream has complete (model::Merge, pull
// form, resumed at each new bound) to a growing analysis::Engine in slices of kSliceEvents, looking
// at the questions between slices; a snapshot is Engine::SnapshotUntil of the bound fed so far,
// rendered as `parmon report` renders it. The work queued is bounded: one mark per session, at
// most kMaxQueries questions (more are answered "busy" at once).
//
// A per-rank session (STORE/<session>/rank-K.ptrace, one stream per rank assembled by the
// session's name, i.e. the job id) is fed the same way once every rank's file is there and every
// rank has its first clock round (MPI_Init's MpiClockSync ping-pong): one multi-part reader whose
// Refresh follows every rank file, a model::Session with follow_clocks whose clock maps gain the
// later rounds in place (a Merge holds pointers to them), and the bound fed is what every rank
// has complete, on rank 0's clock. Until then a question analyses the files from their start.
// At the end the engine's last snapshot is the final report only if it saw the session as a
// reader opened afresh does (the same alignment for every event fed: Session::realigned; the
// same location ids and stream order); otherwise the stored directory is analysed once,
// post-mortem.
//
// Memory per live session: the engine's records (per location, per link, per message in flight;
// per-interval rows of kGrowingIntervals intervals), one decompressed chunk per stream in the
// merge, and the reader's index of the file (a few dozen bytes per chunk). A finished session
// keeps its final report's Results until kMaxFinished later ones have finished.
#ifndef PARMON_SRC_LIVE_ANALYSIS_SERVICE_H_
#define PARMON_SRC_LIVE_ANALYSIS_SERVICE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "base/status.h"

namespace parmon::live {

struct Snapshot {
  Status status;
  // JSON: session, format, ended, incremental, events, window_end_ns, duration_ns,
  // analysed_events (fed to the engine so far), cpu_ns (worker CPU spent on the session so far),
  // snapshot_ns (to build and render this one).
  std::string meta;
  std::string body;  // the report (JSON as `parmon report --format json`, or text)
};

class AnalysisService {
 public:
  static constexpr size_t kSliceEvents = 1u << 16;
  static constexpr size_t kMaxQueries = 64;
  static constexpr size_t kMaxLive = 64;  // sessions analysed at once; more wait their turn
  static constexpr size_t kMaxFinished = 16;
  // How often a per-rank session not yet fed is looked at again (each look opens every file).
  static constexpr std::chrono::milliseconds kRetry{250};

  explicit AnalysisService(std::string store_dir);
  ~AnalysisService();  // stops the worker

  // A stream of session got bytes or ended (io thread; cheap).
  void Touch(const std::string& session, bool per_rank);
  // A new recording replaced the session's file (io thread): its analysis starts again.
  void Forget(const std::string& session);
  // Queues a question: done(snapshot) runs on the worker thread. False when kMaxQueries are
  // already waiting (the caller answers "busy").
  bool Ask(const std::string& session,
           bool per_rank,
           const std::string& format,
           std::function<void(Snapshot)> done);

 private:
  struct Live;
  struct Query {
    std::string session, format;
    bool per_rank = false;
    std::function<void(Snapshot)> done;
  };
  void Loop();
  Live& Get(const std::string& session, bool per_rank);
  // Reads what the session's file gained and feeds one slice; true when more is left to feed
  // (or it was touched while the last bound was fed: its files are read again).
  bool Step(Live& l);
  // The session's reader and model::Session, when its files are ready to be fed.
  bool OpenSingle(Live& l);
  bool OpenPerRank(Live& l);
  Snapshot Answer(const Query& q);
  void Retire(Live& l);

  std::string store_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::set<std::string> dirty_;  // guarded by mu_
  std::map<std::string, bool> dirty_per_rank_;
  std::set<std::string> forget_;  // guarded by mu_
  std::deque<Query> queries_;     // guarded by mu_
  // Worker-only.
  std::map<std::string, std::unique_ptr<Live>> live_;
  std::deque<std::string> finished_order_;
  std::thread worker_;
};

}  // namespace parmon::live

#endif  // PARMON_SRC_LIVE_ANALYSIS_SERVICE_H_
