// TraceWriter: writes a trace chunk by chunk to a ChunkSink (a file, a pipe, a socket). Used by
// the recorder (and by tests and benchmarks that build traces whose right answer they know).
//
// Every chunk is written whole with one writev() of header and payload, so a reader of a file
// whose writer was killed sees every chunk before the last complete one. WriteWatermark() tells a
// reader of the growing file up to when every stream is complete. Finish() adds the index, the
// END chunk and the trailer.
//
// A full disk: before each chunk the writer reserves (fallocate) the space that chunk and the
// closing chunks need. When the reservation fails the chunk is refused (its events are the
// caller's to count as lost) and the writer takes nothing more but Finish(), which writes the
// index, the END chunk and the trailer into the space kept back: the file ends consistent and
// its END says what was lost.
#ifndef PARMON_SRC_FORMAT_WRITER_H_
#define PARMON_SRC_FORMAT_WRITER_H_

#include <zstd.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/chunk.h"
#include "format/codec.h"
#include "format/sink.h"

namespace parmon::format {

struct WriterOptions {
  int zstd_level = 1;
};

// Per-stream totals the END chunk records so a reader can count exactly what a damaged file lost.
struct StreamTotal {
  uint32_t location = 0;
  Source source = Source::kRuntime;
  uint64_t events = 0;
};

class TraceWriter {
 public:
  // A new trace file at path.
  static StatusOr<std::unique_ptr<TraceWriter>> Create(const std::string& path,
                                                       WriterOptions options = {});
  // A trace written to any sink (MakeFdSink for a pipe or socket); writes the file header and
  // the schema at once.
  static StatusOr<std::unique_ptr<TraceWriter>> Create(std::unique_ptr<ChunkSink> sink,
                                                       WriterOptions options = {});
  ~TraceWriter();

  Status WriteSession(const std::vector<std::pair<std::string, std::string>>& kv);
  // Compresses and writes the encoder's events as one chunk, then resets the encoder.
  Status Flush(StreamEncoder* encoder);
  // Writes already-encoded events (a StreamEncoder's bytes) as one chunk.
  Status WriteEncoded(uint32_t location,
                      Source source,
                      uint64_t first_ts,
                      uint64_t last_ts,
                      uint32_t count,
                      const uint8_t* bytes,
                      size_t size);
  // Writes a WATERMARK chunk: every event with a time below ts, of every stream, has been written
  // before it. The caller flushes its partial encoders first, or the promise is false.
  Status WriteWatermark(uint64_t ts);
  // Writes the index, the END chunk (with extra key/values) and the trailer, and closes the file.
  Status Finish(const std::vector<std::pair<std::string, std::string>>& end_kv = {});

  uint64_t bytes_written() const { return offset_; }
  // True after a write was refused because the disk is full: the space to close the trace
  // (index, END, trailer) was kept back, so Finish() still writes a consistent end.
  bool space_exhausted() const { return space_exhausted_; }
  // Finish() can still close the trace: no write failed, or only for lack of space.
  bool can_finish() const { return !failed_ || space_exhausted_; }
  uint64_t events_written() const { return events_written_; }
  const std::string& path() const { return path_; }  // the sink's name

 private:
  TraceWriter(std::unique_ptr<ChunkSink> sink, WriterOptions options);
  Status WriteBytes(const iovec* iov, int count);
  // Reserves the space for a chunk of `chunk_bytes` plus everything Finish() writes; an error
  // (and space_exhausted_) when the disk cannot hold both.
  Status ReserveFor(size_t chunk_bytes);
  Status WriteChunk(ChunkType type,
                    uint32_t location,
                    Source source,
                    uint64_t first_ts,
                    uint64_t last_ts,
                    uint32_t count,
                    const uint8_t* raw,
                    size_t raw_size,
                    bool compress,
                    uint8_t flags = 0);

  struct IndexEntry {
    uint64_t offset;
    uint32_t location;
    Source source;
    ChunkType type;
    uint64_t first_ts, last_ts;
    uint32_t count;
  };

  std::unique_ptr<ChunkSink> sink_;
  std::string path_;
  WriterOptions options_;
  ZSTD_CCtx* cctx_ = nullptr;
  std::vector<uint8_t> compressed_;
  uint64_t offset_ = 0;
  uint64_t sequence_ = 0;
  uint64_t events_written_ = 0;
  std::vector<IndexEntry> index_;
  std::vector<StreamTotal> totals_;
  bool failed_ = false;
  bool finished_ = false;
  bool finishing_ = false;        // Finish() writes into the reserve
  bool space_exhausted_ = false;  // a chunk was refused for lack of space
  bool can_reserve_ = true;       // the sink allocates space ahead (a regular file)
  uint64_t reserved_until_ = 0;   // bytes from the start of the file known to be allocated
};

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_WRITER_H_
