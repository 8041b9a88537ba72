#include "format/writer.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "base/crc32c.h"

namespace parmon::format {

StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path,
                                                           WriterOptions options) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::Error(fmt::format("cannot create trace file {}: {}", path, strerror(errno)));
  auto writer = std::unique_ptr<TraceWriter>(new TraceWriter(fd, path, options));
  FileHeader header;
  std::memcpy(header.magic, kFileMagic, sizeof header.magic);
  header.version_major = kVersionMajor;
  header.version_minor = kVersionMinor;
  header.flags = 0;
  if (write(fd, &header, sizeof header) != sizeof header)
    return Status::Error(fmt::format("cannot write trace file {}: {}", path, strerror(errno)));
  writer->offset_ = sizeof header;
  ByteBuffer schema;
  EncodeSchema(&schema);
  PARMON_RETURN_IF_ERROR(writer->WriteChunk(ChunkType::kSchema, 0, Source::kDefinitions, 0, 0, 0,
                                            schema.data(), schema.size(), true));
  return writer;
}

TraceWriter::TraceWriter(int fd, std::string path, WriterOptions options)
    : fd_(fd), path_(std::move(path)), options_(options), cctx_(ZSTD_createCCtx()) {
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, options_.zstd_level);
}

TraceWriter::~TraceWriter() {
  if (fd_ >= 0)
    close(fd_);
  ZSTD_freeCCtx(cctx_);
}

Status TraceWriter::WriteSession(const std::vector<std::pair<std::string, std::string>>& kv) {
  ByteBuffer buf;
  EncodeKeyValues(kv, &buf);
  return WriteChunk(ChunkType::kSession, 0, Source::kDefinitions, 0, 0, 0, buf.data(), buf.size(),
                    true);
}

Status TraceWriter::Flush(StreamEncoder* encoder) {
  if (encoder->count() == 0)
    return Status::Ok();
  Status s =
      WriteEncoded(encoder->location(), encoder->source(), encoder->first_ts(), encoder->last_ts(),
                   encoder->count(), encoder->bytes().data(), encoder->bytes().size());
  encoder->Reset();
  return s;
}

Status TraceWriter::WriteEncoded(uint32_t location,
                                 Source source,
                                 uint64_t first_ts,
                                 uint64_t last_ts,
                                 uint32_t count,
                                 const uint8_t* bytes,
                                 size_t size) {
  if (count == 0)
    return Status::Ok();
  PARMON_RETURN_IF_ERROR(WriteChunk(ChunkType::kEvents, location, source, first_ts, last_ts, count,
                                    bytes, size, true));
  events_written_ += count;
  for (auto& t : totals_) {
    if (t.location == location && t.source == source) {
      t.events += count;
      return Status::Ok();
    }
  }
  totals_.push_back({location, source, count});
  return Status::Ok();
}

Status TraceWriter::WriteChunk(ChunkType type,
                               uint32_t location,
                               Source source,
                               uint64_t first_ts,
                               uint64_t last_ts,
                               uint32_t count,
                               const uint8_t* raw,
                               size_t raw_size,
                               bool compress) {
  if (failed_)
    return Status::Error(fmt::format("trace file {} is no longer writable", path_));
  ChunkHeader h;
  std::memset(&h, 0, sizeof h);
  h.magic = kChunkMagic;
  h.type = static_cast<uint16_t>(type);
  h.location = location;
  h.source = static_cast<uint8_t>(source);
  h.first_ts = first_ts;
  h.last_ts = last_ts;
  h.event_count = count;
  h.raw_size = static_cast<uint32_t>(raw_size);
  h.sequence = sequence_;
  const uint8_t* stored = raw;
  size_t stored_size = raw_size;
  h.codec = static_cast<uint16_t>(Codec::kRaw);
  if (compress && raw_size > 64) {
    size_t bound = ZSTD_compressBound(raw_size);
    if (compressed_.size() < bound)
      compressed_.resize(bound);
    size_t n = ZSTD_compress2(cctx_, compressed_.data(), compressed_.size(), raw, raw_size);
    if (!ZSTD_isError(n) && n < raw_size) {
      stored = compressed_.data();
      stored_size = n;
      h.codec = static_cast<uint16_t>(Codec::kZstd);
    }
  }
  h.stored_size = static_cast<uint32_t>(stored_size);
  h.payload_crc = Crc32c(stored, stored_size);
  h.header_crc = Crc32c(&h, offsetof(ChunkHeader, header_crc));

  iovec iov[2] = {{&h, sizeof h}, {const_cast<uint8_t*>(stored), stored_size}};
  size_t total = sizeof h + stored_size;
  size_t done = 0;
  while (done < total) {
    ssize_t n = writev(fd_, iov, 2);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      failed_ = true;
      int err = n < 0 ? errno : EIO;
      // Cut the partial chunk off so the file stays readable up to the last whole chunk.
      if (ftruncate(fd_, static_cast<off_t>(offset_)) != 0) {
      }
      return Status::Error(fmt::format("writing trace file {} failed at byte {}: {}", path_,
                                       offset_ + done, strerror(err)));
    }
    done += static_cast<size_t>(n);
    // Advance the iovecs past what was written.
    size_t skip = static_cast<size_t>(n);
    for (auto& v : iov) {
      size_t k = std::min(skip, v.iov_len);
      v.iov_base = static_cast<uint8_t*>(v.iov_base) + k;
      v.iov_len -= k;
      skip -= k;
    }
  }
  index_.push_back({offset_, location, source, type, first_ts, last_ts, count});
  offset_ += total;
  ++sequence_;
  return Status::Ok();
}

Status TraceWriter::Finish(const std::vector<std::pair<std::string, std::string>>& end_kv) {
  if (finished_)
    return Status::Ok();
  finished_ = true;
  ByteBuffer index;
  for (const auto& e : index_) {
    uint8_t* p = index.Reserve(8 * kMaxVarintBytes);
    p = PutVarint(p, e.offset);
    p = PutVarint(p, e.location);
    p = PutVarint(p, static_cast<uint64_t>(e.source));
    p = PutVarint(p, static_cast<uint64_t>(e.type));
    p = PutVarint(p, e.first_ts);
    p = PutVarint(p, e.last_ts);
    p = PutVarint(p, e.count);
    index.Commit(p);
  }
  PARMON_RETURN_IF_ERROR(WriteChunk(ChunkType::kIndex, 0, Source::kDefinitions, 0, 0,
                                    static_cast<uint32_t>(index_.size()), index.data(),
                                    index.size(), true));
  uint64_t index_offset = index_.back().offset;
  std::vector<std::pair<std::string, std::string>> kv = end_kv;
  kv.emplace_back("index_offset", std::to_string(index_offset));
  kv.emplace_back("events", std::to_string(events_written_));
  std::string totals;
  for (const auto& t : totals_)
    totals += fmt::format("{}:{}:{};", t.location, static_cast<int>(t.source), t.events);
  kv.emplace_back("stream_totals", totals);
  ByteBuffer end;
  EncodeKeyValues(kv, &end);
  uint64_t end_offset = offset_;
  PARMON_RETURN_IF_ERROR(
      WriteChunk(ChunkType::kEnd, 0, Source::kDefinitions, 0, 0, 0, end.data(), end.size(), false));
  Trailer t;
  t.end_chunk_offset = end_offset;
  t.magic = kTrailerMagic;
  t.crc = Crc32c(&t, offsetof(Trailer, crc));
  if (write(fd_, &t, sizeof t) != sizeof t)
    return Status::Error(fmt::format("writing trace file {} failed: {}", path_, strerror(errno)));
  offset_ += sizeof t;
  if (close(fd_) != 0)
    return Status::Error(fmt::format("closing trace file {} failed: {}", path_, strerror(errno)));
  fd_ = -1;
  return Status::Ok();
}

}  // namespace parmon::format
