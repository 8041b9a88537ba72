#include "format/chunk_stream.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/crc32c.h"

namespace parmon::format {
namespace {
constexpr size_t kReadBlock = 1 << 16;
}  // namespace

bool ChunkHeaderValid(const ChunkHeader& h) {
  return h.magic == kChunkMagic && h.header_crc == Crc32c(&h, offsetof(ChunkHeader, header_crc)) &&
         h.stored_size <= kMaxChunkPayload && h.raw_size <= kMaxChunkPayload;
}

uint64_t WholeChunksEnd(int fd, uint64_t at, uint64_t size, uint64_t* chunks) {
  if (at == 0) {
    if (size < sizeof(FileHeader))
      return 0;
    at = sizeof(FileHeader);
  }
  ChunkHeader h;
  while (at + sizeof h <= size &&
         pread(fd, &h, sizeof h, static_cast<off_t>(at)) == static_cast<ssize_t>(sizeof h) &&
         ChunkHeaderValid(h) && at + sizeof h + h.stored_size <= size) {
    at += sizeof h + h.stored_size;
    if (chunks)
      ++*chunks;
  }
  return at;
}

ChunkStream::ChunkStream(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}

bool ChunkStream::Fill(size_t n) {
  while (buf_.size() - pos_ < n && !eof_) {
    if (pos_ > 0 && pos_ >= buf_.size() / 2) {  // keep the buffer from growing
      buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(pos_));
      pos_ = 0;
    }
    size_t old = buf_.size();
    buf_.resize(old + std::max(kReadBlock, n - (old - pos_)));
    ssize_t r = read(fd_, buf_.data() + old, buf_.size() - old);
    if (r < 0 && errno == EINTR) {
      buf_.resize(old);
      continue;
    }
    if (r < 0)
      problems_.push_back({offset_ + (old - pos_),
                           fmt::format("cannot read {}: {}", name_, strerror(errno)),
                           -1,
                           {}});
    buf_.resize(old + static_cast<size_t>(std::max<ssize_t>(r, 0)));
    if (r <= 0)
      eof_ = true;
  }
  return buf_.size() - pos_ >= n;
}

void ChunkStream::Consume(size_t n) {
  pos_ += n;
  offset_ += n;
}

Status ChunkStream::ReadFileHeader(FileHeader* out) {
  if (!Fill(sizeof *out))
    return Status::Error(
        fmt::format("{} is not a parmon trace (it ends before the file header)", name_));
  std::memcpy(out, buf_.data() + pos_, sizeof *out);
  if (std::memcmp(out->magic, kFileMagic, sizeof out->magic) != 0)
    return Status::Error(fmt::format(
        "{} is not a parmon trace (it does not start with the parmon trace signature)", name_));
  if (!ReadableMajor(out->version_major))
    return Status::Error(
        fmt::format("{} is a parmon trace of format version {}.{}, which this "
                    "parmon (format {}.{}) cannot read",
                    name_, out->version_major, out->version_minor, kVersionMajor, kVersionMinor));
  Consume(sizeof *out);
  return Status::Ok();
}

bool ChunkStream::Next(StreamChunk* out) {
  uint64_t damaged_at = UINT64_MAX;  // where a run of unreadable bytes began
  auto note_skip = [&](bool resumed) {
    if (damaged_at == UINT64_MAX)
      return;
    problems_.push_back(
        {damaged_at,
         fmt::format("damaged chunk header at offset {}; {} bytes skipped{}", damaged_at,
                     offset_ - damaged_at,
                     resumed ? fmt::format(", reading resumes at offset {}", offset_)
                             : ", no intact chunk follows"),
         -1,
         {}});
  };
  for (;;) {
    if (!Fill(sizeof(ChunkHeader))) {
      // The end of a closed trace: its trailer, nothing to report.
      Trailer t;
      const size_t left = buf_.size() - pos_;
      if (left == sizeof t && damaged_at == UINT64_MAX) {
        std::memcpy(&t, buf_.data() + pos_, sizeof t);
        if (t.magic == kTrailerMagic && t.crc == Crc32c(&t, offsetof(Trailer, crc))) {
          Consume(left);
          return false;
        }
      }
      if (left > 0 && damaged_at == UINT64_MAX) {
        Problem p{offset_,
                  fmt::format("the stream ends {} bytes into a chunk header at offset {}",
                              buf_.size() - pos_, offset_),
                  -1,
                  {}};
        p.tail = true;
        problems_.push_back(std::move(p));
      }
      Consume(buf_.size() - pos_);
      note_skip(false);
      return false;
    }
    ChunkHeader h;
    std::memcpy(&h, buf_.data() + pos_, sizeof h);
    if (!ChunkHeaderValid(h)) {
      if (damaged_at == UINT64_MAX)
        damaged_at = offset_;
      Consume(1);
      continue;
    }
    note_skip(true);
    damaged_at = UINT64_MAX;
    const size_t total = sizeof h + h.stored_size;
    if (!Fill(total)) {
      Problem p{offset_,
                fmt::format("the stream ends inside chunk #{} at offset {} ({} of its {} payload "
                            "bytes present)",
                            h.sequence, offset_, buf_.size() - pos_ - sizeof h, h.stored_size),
                h.type == static_cast<uint16_t>(ChunkType::kEvents) ? h.event_count : 0,
                h.location};
      p.tail = true;
      problems_.push_back(std::move(p));
      Consume(buf_.size() - pos_);
      return false;
    }
    const uint8_t* payload = buf_.data() + pos_ + sizeof h;
    if (Crc32c(payload, h.stored_size) != h.payload_crc) {
      problems_.push_back({offset_,
                           fmt::format("chunk #{} at offset {}: payload checksum mismatch; its {} "
                                       "events are skipped",
                                       h.sequence, offset_, h.event_count),
                           h.type == static_cast<uint16_t>(ChunkType::kEvents) ? h.event_count : 0,
                           h.location});
      Consume(total);
      continue;
    }
    out->offset = offset_;
    out->header = h;
    out->payload.assign(payload, payload + h.stored_size);
    Consume(total);
    return true;
  }
}

}  // namespace parmon::format
