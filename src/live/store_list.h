// The sessions of a collector's store as the disk says (live/store.h is the layout): for readers
// outside the collector's io thread, such as `parmon serve --http` (web/session_host.h), which
// must never touch the collector's in-memory state. The collector writes each stream's sidecar
// STORE/.streams/<key>.meta by rename, and marks it ended only after the recorder's BYE, i.e.
// after the stream's last byte is in the store file: a sidecar read as ended means the file is
// whole. A per-rank session is complete when as many ranks as the recorders said the world holds
// (the sidecars' `ranks`) have ended, not when every file present is closed: ranks that have not
// reached the collector yet have no file. A stream the collector marked lost (its recorder went
// without the end and did not come back in time) is done too: nothing more is expected of it, and
// once one rank is lost the ranks that never arrived are not waited for either (the job is
// broken). A trace put in the store by hand has no sidecar and is taken as complete.
#ifndef PARMON_SRC_LIVE_STORE_LIST_H_
#define PARMON_SRC_LIVE_STORE_LIST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace parmon::live {

struct StoredStream {
  int rank = -1;  // -1: a single-process session
  std::string path;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool has_meta = false;  // written by the collector (else put in the store by hand)
  bool ended = false;     // the collector holds its last byte (the recorder said BYE)
  int ranks = 0;          // the world size its recorder said (0: unknown)
  bool lost = false;      // the collector marked it lost (the recorder went without the end)
  std::string lost_reason;
};

struct StoredSession {
  std::string name;
  std::string path;  // STORE/<name>.ptrace, or the directory STORE/<name>
  bool per_rank = false;
  std::vector<StoredStream> streams;  // by rank
  int ranks_expected = 0;             // per-rank: the world size (0: unknown)
  // The collector says nothing more will come: every stream ended (and, per-rank, every rank of
  // the world is there).
  bool complete = false;
  // Some stream is lost: one sentence saying which and what the collector holds (else empty).
  std::string lost;
  uint64_t bytes() const;
  // Changes whenever any stream's file does (size or modification time).
  std::string signature() const;
};

// Every session of the store, by name (names that are no session name are skipped).
std::vector<StoredSession> ListStore(const std::string& dir);
// One session, or nullopt when the store has no such session (or the name is not valid).
std::optional<StoredSession> FindStored(const std::string& dir, const std::string& name);

}  // namespace parmon::live

#endif  // PARMON_SRC_LIVE_STORE_LIST_H_
