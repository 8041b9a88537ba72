// Consumer side of a remote session: copies a session held by a collector into local files as
// its bytes arrive, so every local reader works on it unchanged. A single-process session
// becomes one growing trace file (TraceReader::Refresh() reads what was appended); a per-rank
// MPI session becomes a directory of rank-<K>.ptrace files, fetched side by side. Used by
// `parmon fetch`, and by `parmon top`, `dump --follow` and `report --follow` on HOST:PORT/SESSION.
#ifndef PARMON_SRC_LIVE_FETCH_H_
#define PARMON_SRC_LIVE_FETCH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"

namespace parmon::live {

struct FetchResult {
  std::string path;  // the file, or the directory of rank files
  bool per_rank = false;
  uint64_t bytes = 0;     // written in all
  bool complete = false;  // every stream ended (its recorder finished) and was copied whole
  // The collector marked a stream lost (its recorder went without the end): what it said, one
  // sentence (per-rank: of the first rank lost). Everything it held was copied.
  std::string lost;
};

// Copies SESSION from the collector at host_port ("HOST:PORT") to out_path. follow: keep
// copying live appends until the session ends (or *stop becomes true); else stop at what the
// collector holds now. Following a per-rank session waits for every rank of the world (the size
// its recorders told the collector), asking the collector for the ranks that reached it since
// about every 250 ms: it ends when every rank of the world has ended, or when every rank there
// has ended or is lost and one is lost (the job broke: ranks missing then are not waited for).
// Blocks; run it on a thread of your own to read the file meanwhile. token_file: see ReadToken
// (client.h).
StatusOr<FetchResult> FetchSession(const std::string& host_port,
                                   const std::string& session,
                                   const std::string& out_path,
                                   bool follow,
                                   const std::atomic<bool>* stop = nullptr,
                                   const std::string& token_file = "");

// A FetchSession(follow) running on its own thread, for followers that read the local copy
// while it grows (live_view's LiveSource: path = path(), writer_gone = done(), complete = done()
// and complete(), keep_alive = the object). The destructor stops the fetch and waits for its
// thread.
class BackgroundFetch {
 public:
  // source: "HOST:PORT/SESSION"; out_path: the local file, or directory for a per-rank session
  // (created when the first bytes arrive). remove_at_end: delete out_path in the destructor.
  // A session the collector does not hold yet is asked for again for up to a minute.
  static StatusOr<std::shared_ptr<BackgroundFetch>> Start(const std::string& source,
                                                          const std::string& out_path,
                                                          bool remove_at_end = false,
                                                          const std::string& token_file = "");
  ~BackgroundFetch();
  const std::string& path() const { return path_; }
  // The fetch has ended: the session is complete, lost, or it failed (status() says why).
  bool done() const { return done_.load(); }
  Status status() const;
  // Once done(): whether every stream ended and was copied whole (the recording is complete).
  bool complete() const;
  // Once done(): FetchResult::lost (empty when nothing was lost).
  std::string lost() const;

 private:
  BackgroundFetch() = default;
  std::string path_;
  bool remove_at_end_ = false;
  std::atomic<bool> stop_{false}, done_{false};
  mutable std::mutex mu_;
  Status status_;          // guarded by mu_
  bool complete_ = false;  // guarded by mu_
  std::string lost_;       // guarded by mu_
  std::thread thread_;
};

// Whether name is HOST:PORT/SESSION rather than a local path (no such file exists, and it
// parses with a port and a session).
bool IsRemoteSession(const std::string& name);

}  // namespace parmon::live

#endif  // PARMON_SRC_LIVE_FETCH_H_
