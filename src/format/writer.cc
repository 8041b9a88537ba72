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
  PARMON_ASSIGN_OR_RETURN(auto sink, OpenFileSink(path));
  return Create(std::move(sink), options);
}

StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Create(std::unique_ptr<ChunkSink> sink,
                                                           WriterOptions options) {
  auto writer = std::unique_ptr<TraceWriter>(new TraceWriter(std::move(sink), options));
  FileHeader header;
  std::memcpy(header.magic, kFileMagic, sizeof header.magic);
  header.version_major = kVersionMajor;
  header.version_minor = kVersionMinor;
  header.flags = 0;
  iovec iov{&header, sizeof header};
  PARMON_RETURN_IF_ERROR(writer->WriteBytes(&iov, 1));
  writer->offset_ = sizeof header;
  ByteBuffer schema;
  EncodeSchema(&schema);
  PARMON_RETURN_IF_ERROR(writer->WriteChunk(ChunkType::kSchema, 0, Source::kDefinitions, 0, 0, 0,
                                            schema.data(), schema.size(), true));
  return writer;
}

TraceWriter::TraceWriter(std::unique_ptr<ChunkSink> sink, WriterOptions options)
    : sink_(std::move(sink)), path_(sink_->name()), options_(options), cctx_(ZSTD_createCCtx()) {
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, options_.zstd_level);
  // At the default level, a 16 KiB match table (2^12 entries) instead of level 1's 64 KiB: it
  // stays in the L1 cache, and compresses the recorder's chunks 13-39% faster for 0-1% more bytes
  // (chunks of a recorded MPI ping-pong and halo, docs/format.md).
  if (options_.zstd_level == 1)
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_hashLog, 12);
}

TraceWriter::~TraceWriter() {
  ZSTD_freeCCtx(cctx_);
}

Status TraceWriter::WriteBytes(const iovec* iov, int count) {
  size_t written = 0;
  Status s = sink_->Write(iov, count, &written);
  if (!s.ok()) {
    failed_ = true;
    // Cut the partial chunk off so the file stays readable up to the last whole chunk (a pipe's
    // reader resynchronises instead).
    if (written > 0)
      sink_->Truncate(offset_);
    return Status::Error(fmt::format("{} (at byte {})", s.message(), offset_ + written));
  }
  return s;
}

namespace {
// What Finish() may need beyond the index: the END chunk (the recorder's totals, one entry per
// location that lost events) and the trailer, with room to spare.
constexpr uint64_t kEndReserve = 64u << 10;
// Reserve ahead in steps, so that most chunks cost no fallocate call.
constexpr uint64_t kReserveStep = 1u << 20;
}  // namespace

Status TraceWriter::ReserveFor(size_t chunk_bytes) {
  if (!can_reserve_ || finishing_)
    return Status::Ok();
  // The index holds one entry per chunk of at most 7 varints (stored raw when zstd would not
  // make it smaller); the END lists each stream's total.
  const uint64_t closing = kEndReserve + 2 * sizeof(ChunkHeader) +
                           (index_.size() + 2) * 7 * kMaxVarintBytes + totals_.size() * 48;
  const uint64_t need = offset_ + chunk_bytes + closing;
  if (need <= reserved_until_)
    return Status::Ok();
  using R = ChunkSink::Reservation;
  uint64_t want = need + kReserveStep;
  R r = sink_->Reserve(want);
  if (r == R::kNoSpace) {
    want = need;  // the last step does not fit; what this chunk and the close need may
    r = sink_->Reserve(want);
  }
  if (r == R::kUnsupported) {
    can_reserve_ = false;
    return Status::Ok();
  }
  if (r == R::kNoSpace) {
    failed_ = true;
    space_exhausted_ = true;
    return Status::Error(
        fmt::format("no space left for trace file {} (at byte {}); the space to close it is kept",
                    path_, offset_));
  }
  reserved_until_ = want;
  return Status::Ok();
}

Status TraceWriter::WriteWatermark(uint64_t ts) {
  return WriteChunk(ChunkType::kWatermark, 0, Source::kDefinitions, ts, ts, 0, nullptr, 0, false);
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
  // Bytes of a StreamEncoder: time args relative to their events' times, some args differences.
  PARMON_RETURN_IF_ERROR(WriteChunk(ChunkType::kEvents, location, source, first_ts, last_ts, count,
                                    bytes, size, true, kEncoderCoding));
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
                               bool compress,
                               uint8_t flags) {
  if (failed_ && !finishing_)
    return Status::Error(fmt::format("trace file {} is no longer writable", path_));
  ChunkHeader h;
  std::memset(&h, 0, sizeof h);
  h.magic = kChunkMagic;
  h.type = static_cast<uint16_t>(type);
  h.location = location;
  h.source = static_cast<uint8_t>(source);
  h.flags = flags;
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
  const size_t total = sizeof h + stored_size;
  PARMON_RETURN_IF_ERROR(ReserveFor(total));
  PARMON_RETURN_IF_ERROR(WriteBytes(iov, stored_size ? 2 : 1));
  index_.push_back({offset_, location, source, type, first_ts, last_ts, count});
  offset_ += total;
  ++sequence_;
  return Status::Ok();
}

Status TraceWriter::Finish(const std::vector<std::pair<std::string, std::string>>& end_kv) {
  if (finished_)
    return Status::Ok();
  if (!can_finish())
    return Status::Error(fmt::format("trace file {} is no longer writable", path_));
  finished_ = true;
  finishing_ = true;
  failed_ = false;
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
  iovec iov{&t, sizeof t};
  PARMON_RETURN_IF_ERROR(WriteBytes(&iov, 1));
  offset_ += sizeof t;
  sink_->ReleaseReserve(offset_);
  return sink_->Close();
}

}  // namespace parmon::format
