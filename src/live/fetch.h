// Consumer side of a remote session: copies a session held by a collector into local files as
// its bytes arrive, so every local reader works on it unchanged. A single-process session
// becomes one growing trace file (TraceReader::Refresh() reads what was appended); a per-rank
// MPI session becomes a directory of rank-<K>.ptrace files, fetched side by side. Used by
// `parmon fetch`, and by `parmon top`, `dump --follow` and `report --follow` on HOST:PORT/SESSION.
#ifndef PARMON_SRC_LIVE_FETCH_H_
#define PARMON_SRC_LIVE_FETCH_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace parmon::live {

struct FetchResult {
  std::string path;  // the file, or the directory of rank files
  bool per_rank = false;
  uint64_t bytes = 0;     // written in all
  bool complete = false;  // every stream ended (its recorder finished) and was copied whole
};

// Copies SESSION from the collector at host_port ("HOST:PORT") to out_path. follow: keep
// copying live appends until the session ends (or *stop becomes true); else stop at what the
// collector holds now. Blocks; run it on a thread of your own to read the file meanwhile.
// token_file: see ReadToken (client.h).
StatusOr<FetchResult> FetchSession(const std::string& host_port,
                                   const std::string& session,
                                   const std::string& out_path,
                                   bool follow,
                                   const std::atomic<bool>* stop = nullptr,
                                   const std::string& token_file = "");

}  // namespace parmon::live

#endif  // PARMON_SRC_LIVE_FETCH_H_
