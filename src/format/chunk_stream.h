// ChunkStream: reads a trace front to back from a file descriptor that cannot seek (a pipe, a
// socket, stdin, a FIFO; a regular or growing file works too), for consumers that handle chunks
// as they arrive (a live collector, a forwarder). It yields the file header, then every chunk
// whose header and payload pass their checksums, with its stored payload.
//
// Damage is passed over, never fatal: a header that fails its checksum is resynchronised by
// searching forward for the next header that passes; a payload that fails is skipped (its
// header's length is trusted, since the header passed). Each is one Problem. Memory is bounded:
// the buffer holds at most one chunk (kMaxChunkPayload) and one read block.
//
// TraceReader does not use it: it needs random access, and reads a stream through a spooled
// temporary file (format/input.h) with the same checks.
#ifndef PARMON_SRC_FORMAT_CHUNK_STREAM_H_
#define PARMON_SRC_FORMAT_CHUNK_STREAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/chunk.h"
#include "format/reader.h"

namespace parmon::format {

struct StreamChunk {
  uint64_t offset = 0;  // of the header, in the stream
  ChunkHeader header{};
  std::vector<uint8_t> payload;  // as stored (compressed when header.codec says so), CRC checked
};

class ChunkStream {
 public:
  ChunkStream(int fd, std::string name);  // does not own fd

  // Reads and checks the 16-byte file header (the stream's first bytes).
  Status ReadFileHeader(FileHeader* out);
  // The next intact chunk into *out; false at the end of the stream (or on a read error, then
  // named in problems()). Blocks until the chunk is whole.
  bool Next(StreamChunk* out);
  // Damage passed over so far, and how the stream ended when it ended inside a chunk.
  const std::vector<Problem>& problems() const { return problems_; }
  uint64_t offset() const { return offset_; }  // stream bytes consumed

 private:
  // Makes at least n bytes available at buf_[pos_..]; false when the stream ends first.
  bool Fill(size_t n);
  void Consume(size_t n);

  int fd_;
  std::string name_;
  std::vector<uint8_t> buf_;
  size_t pos_ = 0;       // first unconsumed byte of buf_
  uint64_t offset_ = 0;  // stream offset of buf_[pos_]
  bool eof_ = false;
  std::vector<Problem> problems_;
};

// The header passes its checksum and declares sizes a reader accepts.
bool ChunkHeaderValid(const ChunkHeader& h);

// Walks the whole chunks of a trace file of `size` bytes read through fd from `at` (a chunk
// boundary; 0: the start, the file header skipped): returns the end of the last chunk whose
// header is valid and whose payload is all there (at, or 0 for a file shorter than its header,
// when there is none); *chunks, when given, grows by their count.
uint64_t WholeChunksEnd(int fd, uint64_t at, uint64_t size, uint64_t* chunks = nullptr);

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_CHUNK_STREAM_H_
