// The collector's store: one file per stream, exactly where `parmon record -o` would have put it.
// A single-process session is STORE/<session>.ptrace; a per-rank MPI session is the directory
// STORE/<session>/ with rank-<K>.ptrace per rank (the layout readers merge, docs/comm.md).
//
// A stream's bytes arrive as DATA at stated offsets and are appended in order; the size of the
// file is the resume point, so a collector killed and restarted on the same store tells each
// recorder where to resume and the file ends byte-identical to the recorder's own copy. Which
// recording a file belongs to is kept beside it in STORE/.streams/<key>.meta (the recorder's
// random stream id and whether the recorder said BYE): a new recording under a used name
// replaces the file, as `record -o` would, and a reconnecting one resumes it.
//
// A stream whose recorder's connection closed without its end (the recorder killed) and that
// its recording did not take up again within the collector's grace (ServeOptions::lost_after_s)
// is marked lost in its sidecar, with one sentence saying what the collector holds: readers
// then know that nothing more will come. The mark is withdrawn if the same recording reconnects
// later: it resumes at the size held, as always.
//
// Consumers (subscribers, --exec processes) read the file itself at their own offset, so a slow
// consumer costs the collector no memory: Stream only keeps callbacks to run on the next append.
#ifndef PARMON_SRC_LIVE_STORE_H_
#define PARMON_SRC_LIVE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "live/protocol.h"

namespace parmon::live {

struct Stream {
  std::string session;
  int rank = -1;     // -1: a single-process session
  std::string key;   // "<session>" or "<session>/rank-<K>"
  std::string path;  // the trace file
  std::string meta_path;
  std::string stream_id, job, host;
  int ranks = 0;  // a per-rank session's world size, as its recorder said (0: unknown)
  int fd = -1;
  uint64_t size = 0;         // bytes held, the resume point
  bool ended = false;        // the recorder said BYE after its last byte
  bool lost = false;         // its recorder went without the end and did not come back in time
  std::string lost_reason;   // for lost: one sentence, what happened and what is held
  void* producer = nullptr;  // the connection streaming it now (owned by the server)
  // Run once at the next append or at the end (consumers waiting for bytes).
  std::vector<std::function<void()>> waiters;

  ~Stream();
  // Appends bytes stated to start at offset: a repeat of held bytes is skipped, a gap refused.
  Status Append(uint64_t offset, std::string_view bytes);
  void MarkEnded();
  // The recorder went without the end: nothing more is expected (unless it reconnects).
  void MarkLost(std::string reason);
  // The same recording reconnected: the stream is live again.
  void ClearLost();
  // Up to max bytes from offset (fewer at the end of what is held).
  StatusOr<std::string> Read(uint64_t offset, size_t max) const;
  void Notify();
};

class SessionStore {
 public:
  explicit SessionStore(std::string dir) : dir_(std::move(dir)) {}
  Status Init();  // creates the store and its .streams directory
  const std::string& dir() const { return dir_; }

  // The stream a recorder's HELLO names: resumed when its stream id matches what the store holds,
  // else (re)created empty. *fresh tells a new recording from a resumed one.
  StatusOr<Stream*> OpenForRecorder(const Hello& hello, bool* fresh);
  // A stored or live stream for consumers; rank -1 for a single-process session. Streams
  // stored by an earlier collector are opened read-only from disk.
  Stream* Find(const std::string& session, int rank);
  // The ranks of a per-rank session (in memory or on disk); empty when it is not one.
  std::vector<int> Ranks(const std::string& session);
  // Every stream of a session held in memory (for control routing).
  std::vector<Stream*> StreamsOf(const std::string& session);
  size_t stream_count() const { return streams_.size(); }

 private:
  std::string dir_;
  std::map<std::string, std::unique_ptr<Stream>> streams_;
};

// Writes the store's sidecar of a stream (stream id, job, host, ranks, ended).
Status WriteMeta(const Stream& s);

// The whole chunks at the start of a trace file of `size` bytes (the file header, then chunks
// whose headers are valid and whose payload is all there): their count and where they end.
struct HeldChunks {
  uint64_t chunks = 0;
  uint64_t bytes = 0;  // the file header and the whole chunks
};
HeldChunks CountWholeChunks(int fd, uint64_t size);

}  // namespace parmon::live

#endif  // PARMON_SRC_LIVE_STORE_H_
