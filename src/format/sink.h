// ChunkSink: where a TraceWriter's bytes go. A trace is a sequence of whole chunks, so the same
// bytes serve a file, a pipe and a socket (docs/format.md, "Sinks and streams"); the writer only
// needs "write all of these bytes" and, for files, "cut back to this length" so that a failed
// write never leaves half a chunk behind.
//
// Two sinks exist: a file created at a path, and an already-open file descriptor (a pipe, a
// socket, stdout, or a file the caller opened). Both retry short writes; a socket is written
// with MSG_NOSIGNAL so that a reader that went away is an error, not a SIGPIPE.
#ifndef PARMON_SRC_FORMAT_SINK_H_
#define PARMON_SRC_FORMAT_SINK_H_

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace parmon::format {

class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  // Writes all bytes of iov[0..count) in order, or fails with one sentence naming the sink.
  // *written is how many bytes did reach the sink (all of them on success).
  virtual Status Write(const iovec* iov, int count, size_t* written) = 0;
  // Cuts the sink back to `length` bytes when it can (a regular file), so a reader sees whole
  // chunks only; false when it cannot (a pipe or socket: the reader resynchronises).
  virtual bool Truncate(uint64_t length) = 0;
  // Makes sure the sink can take `length` bytes in all without running out of space (a regular
  // file: the blocks are allocated now, past the end the readers see). kUnsupported for a sink
  // that cannot reserve (a pipe, a socket, a file system without fallocate): the writer then
  // has no reserve and a full disk cuts the trace at its last whole chunk, as before.
  enum class Reservation { kReserved, kNoSpace, kUnsupported };
  virtual Reservation Reserve(uint64_t /*length*/) { return Reservation::kUnsupported; }
  // Gives back reserved blocks past `length` (the file's final size).
  virtual void ReleaseReserve(uint64_t /*length*/) {}
  // Flushes and closes; later writes fail.
  virtual Status Close() = 0;
  // What the sink is, for messages: the path, or "file descriptor N".
  virtual const std::string& name() const = 0;
};

// A new file at path (created or truncated, mode 0644).
StatusOr<std::unique_ptr<ChunkSink>> OpenFileSink(const std::string& path);
// An open file descriptor; owns_fd: close it in Close() or the destructor.
std::unique_ptr<ChunkSink> MakeFdSink(int fd, std::string name, bool owns_fd);

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_SINK_H_
