// The trace file's framing: file header, chunk header, trailer. See docs/format.md.
//
// A file is a 16-byte header followed by self-describing chunks. Each chunk is a 64-byte header
// (checksummed on its own) and a payload (checksummed, usually zstd-compressed). A reader needs no
// seeking: it can read chunk after chunk from a pipe or socket. A closed file ends with an INDEX
// chunk, an END chunk and a 16-byte trailer that points at the END chunk, so a reader with a
// seekable file can find every chunk without reading them all.
#ifndef PARMON_SRC_FORMAT_CHUNK_H_
#define PARMON_SRC_FORMAT_CHUNK_H_

#include <cstdint>
#include <cstring>

namespace parmon::format {

constexpr char kFileMagic[8] = {'P', 'A', 'R', 'M', 'O', 'N', 'T', 'R'};
// What this parmon writes. 1.1 added the WATERMARK chunk; 2.0 the REPEAT RUN inside EVENTS
// payloads (codec.h), which a 1.x reader cannot decode, hence the major version; 2.1 lets a run
// hold kinds of several args whose args after the first are 0 (a 2.0 reader refuses such a run
// in one sentence, losing that chunk); 3.0 writes the time args of an event (MpiRecv.posted, ...)
// relative to the event's own time, in the chunks that say so (kChunkRelativeTimes): a 2.x reader
// would take them for absolute times, so it refuses the file by its major version instead; 4.0
// writes the args of a few kinds (MpiSend's peer, tag, ..., kinds.h's kKindDeltas) as differences
// from the kind's previous event in the chunk (kChunkArgDeltas) and names those args in the SCHEMA
// chunk, which a 3.x reader would misread.
constexpr uint16_t kVersionMajor = 4;
constexpr uint16_t kVersionMinor = 0;
// It reads every major version from this one up to kVersionMajor (1.x payloads hold no runs).
constexpr uint16_t kOldestReadableMajor = 1;
inline bool ReadableMajor(uint16_t major) {
  return major >= kOldestReadableMajor && major <= kVersionMajor;
}

struct FileHeader {
  char magic[8];
  uint16_t version_major;
  uint16_t version_minor;
  uint32_t flags;
};
static_assert(sizeof(FileHeader) == 16);

constexpr uint32_t kChunkMagic = 0x4B434D50;  // "PMCK" little-endian

enum class ChunkType : uint16_t {
  kSession = 1,  // key/value pairs: command, host, clock, ...
  kSchema = 2,   // the event kind table
  kEvents = 3,   // events of one stream (location, source); definitions are events too
  kIndex = 4,    // one entry per chunk
  kEnd = 5,      // totals; the file was closed cleanly
  // Since 1.1: every event with ts < first_ts of every stream is in the file before this chunk
  // (no payload). A reader of a growing file knows up to when its picture is complete.
  kWatermark = 6,
};

enum class Codec : uint16_t { kRaw = 0, kZstd = 1 };

// ChunkHeader::flags of an EVENTS chunk (3.0): its time args are zigzag varints of the event's
// time minus the arg (docs/format.md). Chunks of older files have none and hold absolute times.
constexpr uint8_t kChunkRelativeTimes = 0x01;
// (4.0) The args the SCHEMA names as differences (kinds.h, kKindDeltas) are zigzag varints of the
// arg minus the same arg of the previous event of its kind in the chunk.
constexpr uint8_t kChunkArgDeltas = 0x02;
// What a StreamEncoder's bytes need: the flags TraceWriter::WriteEncoded gives their chunk.
constexpr uint8_t kEncoderCoding = kChunkRelativeTimes | kChunkArgDeltas;

struct ChunkHeader {
  uint32_t magic;
  uint16_t type;
  uint16_t codec;
  uint32_t location;
  uint8_t source;
  uint8_t flags;
  uint16_t reserved0;
  uint64_t first_ts;
  uint64_t last_ts;
  uint32_t event_count;
  uint32_t raw_size;
  uint32_t stored_size;
  uint32_t payload_crc;
  uint64_t sequence;
  uint32_t reserved1;
  uint32_t header_crc;  // CRC-32C of the 60 bytes before it
};
static_assert(sizeof(ChunkHeader) == 64);

// How an EVENTS chunk's args are written: its kChunkRelativeTimes and kChunkArgDeltas flags (the
// decoder's `coding`).
inline uint8_t ChunkCoding(const ChunkHeader& h) {
  return h.flags & (kChunkRelativeTimes | kChunkArgDeltas);
}

constexpr uint32_t kTrailerMagic = 0x4C544D50;  // "PMTL"

struct Trailer {
  uint64_t end_chunk_offset;
  uint32_t magic;
  uint32_t crc;  // CRC-32C of the 12 bytes before it
};
static_assert(sizeof(Trailer) == 16);

// Largest payload a chunk may declare; larger declarations are treated as corruption.
constexpr uint32_t kMaxChunkPayload = 64u << 20;

// Largest location id a chunk or a location definition may carry. Consumers index tables by
// location id; a larger id (a damaged or hostile file) is reported as damage, not sized into a
// table. Recorders number locations densely from 1, so 2^24 leaves room for any real session.
constexpr uint32_t kMaxLocationId = (1u << 24) - 1;

// Smallest encoded event (a repeat run's code byte; else a kind varint and a time-delta varint):
// an EVENTS chunk declaring more events than raw_size / kMinEventBytes is damaged.
constexpr uint32_t kMinEventBytes = 1;

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_CHUNK_H_
