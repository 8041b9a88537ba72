// Encoding of events inside an EVENTS chunk payload (before compression):
//   varint kind, zigzag varint (ts - previous ts), nargs varints, [varint length, payload bytes]
// The number of args and whether a payload follows come from the kind table (the file's SCHEMA
// chunk for files written by another version).
//
// Since format 2.0, a REPEAT RUN (kind 0, never a real kind) packs events that repeat one of the
// two events before them, each in one byte (a tight loop of region enters and leaves):
//   varint 0, count (3-byte varint, 1 .. 2^21-1), varint kind2, varint arg2, varint kind1,
//   varint arg1, then count code bytes.
// (kind2, arg2) and (kind1, arg1) are the events two back and one back when the run begins, both
// of kinds without payload; in 2.0 of one arg, since 2.1 of one or more, the args after the first
// 0 (an MPI_Test polling loop's MpiEnter without its site, and MpiLeave). Code byte c: bit 7 clear
// repeats the event two back, set the event one back; bits 0-6 are the time since the previous
// event (0-127 ns). Each repeated event becomes the one back, and the one back the two back, as
// with any event.
//
// Since 4.0 the args of the kinds kinds.h's kKindDeltas names (the SCHEMA chunk's delta masks)
// are differences: zigzag(arg - the same arg of the previous event of the kind in the chunk, 0
// before the first), in chunks flagged kChunkArgDeltas. Events of a repeat run are never of such
// a kind. A kind's time args are relative to the event's time (3.0), never differences.
#ifndef PARMON_SRC_FORMAT_CODEC_H_
#define PARMON_SRC_FORMAT_CODEC_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/varint.h"
#include "format/chunk.h"
#include "format/event.h"

namespace parmon::format {

// A growable byte buffer with cheap appends (std::string would zero-fill on resize).
class ByteBuffer {
 public:
  uint8_t* Reserve(size_t n) {
    if (size_ + n > data_.size())
      data_.resize(std::max(data_.size() * 2, size_ + n + 4096));
    return data_.data() + size_;
  }
  void Commit(uint8_t* end) { size_ = static_cast<size_t>(end - data_.data()); }
  void Append(const void* p, size_t n) {
    uint8_t* dst = Reserve(n);
    std::memcpy(dst, p, n);
    size_ += n;
  }
  const uint8_t* data() const { return data_.data(); }
  size_t size() const { return size_; }
  void Clear() { size_ = 0; }
  // Clears and gives the memory back (Clear keeps it for the next chunk).
  void Release() {
    std::vector<uint8_t>().swap(data_);
    size_ = 0;
  }
  size_t capacity() const { return data_.size(); }

 private:
  std::vector<uint8_t> data_;
  size_t size_ = 0;
};

// Accumulates the encoded events of one stream until the recorder flushes them as a chunk.
class StreamEncoder {
 public:
  StreamEncoder(uint32_t location, Source source) : location_(location), source_(source) {}

  // Appends an event; its ts should not be earlier than the previous one's (it may be, at a cost
  // of a few bytes).
  void Append(const Event& e);
  // The common case of the runtime's hot path: one arg, no payload.
  void AppendOneArg(uint16_t kind, uint64_t ts, uint64_t arg) {
    EndRun();
    uint8_t* p = buf_.Reserve(3 * kMaxVarintBytes);
    p = PutVarint(p, kind);
    p = PutVarint(p, ZigZag(static_cast<int64_t>(ts - prev_ts_)));
    p = PutVarint(p, arg);
    buf_.Commit(p);
    Note(ts);
  }

  uint32_t location() const { return location_; }
  Source source() const { return source_; }
  uint32_t count() const { return count_; }
  uint64_t first_ts() const { return first_ts_; }
  uint64_t last_ts() const { return last_ts_; }
  size_t raw_size() const { return buf_.size(); }
  const ByteBuffer& bytes() const { return buf_; }
  // Starts a new chunk (after the writer wrote this one).
  void Reset() {
    buf_.Clear();
    EndRun();
    if (delta_kinds_used_) {
      std::memset(prev_args_, 0, sizeof(prev_args_));
      delta_kinds_used_ = false;
    }
    count_ = 0;
    prev_ts_ = 0;
    first_ts_ = 0;
    last_ts_ = 0;
  }
  // Reset, and the buffer's memory freed: for a stream that went idle (its thread may have
  // ended; a recorder sees thousands come and go). It grows again if the stream resumes.
  void ResetAndRelease() {
    Reset();
    buf_.Release();
  }

 private:
  friend class OneArgAppender;
  // Events appended outside an OneArgAppender end its repeat run, and neither they nor the events
  // before them are repeated by a later run (its header names the two it starts from).
  void EndRun() {
    run_count_ = 0;
    history_ = 0;
  }
  void Note(uint64_t ts) {
    if (count_ == 0)
      first_ts_ = ts;
    if (ts > last_ts_)
      last_ts_ = ts;
    prev_ts_ = ts;
    ++count_;
  }

  uint32_t location_;
  Source source_;
  ByteBuffer buf_;
  uint32_t count_ = 0;
  uint64_t prev_ts_ = 0;
  uint64_t first_ts_ = 0;
  uint64_t last_ts_ = 0;
  // OneArgAppender's state between its runs: the last two one-arg events it put (kind1/arg1 the
  // last; history_ of them valid), and the repeat run still open at the buffer's end (its count
  // field's offset, and count; 0: none).
  uint16_t kind1_ = 0, kind2_ = 0;
  uint64_t arg1_ = 0, arg2_ = 0;
  int history_ = 0;
  size_t run_at_ = 0;
  uint32_t run_count_ = 0;
  // The args of each delta kind's previous event in this chunk (by KindInfo::delta_slot), and
  // whether any was written since the last Reset.
  uint64_t prev_args_[kMaxDeltaKinds][kMaxArgs] = {};
  bool delta_kinds_used_ = false;
};

// Appends a run of one-arg events to a StreamEncoder with the encoder's bookkeeping (buffer room,
// count, first and last time) done once per run instead of once per event: the recorder's drain of
// a busy ring (bench/record_loop_bench). An event that repeats one of the two before it within
// 127 ns goes into a repeat run (one byte, see the top of this file); any other is written as
// AppendOneArg writes it. At most `max_events` may be put; Done() commits them (the destructor
// does not).
class OneArgAppender {
 public:
  OneArgAppender(StreamEncoder* encoder, size_t max_events)
      : encoder_(encoder),
        p_(encoder->buf_.Reserve(max_events * kMaxBytes)),
        base_(p_ - encoder->buf_.size()),
        prev_ts_(encoder->prev_ts_),
        last_ts_(encoder->last_ts_),
        arg1_(encoder->arg1_),
        arg2_(encoder->arg2_),
        kind1_(encoder->kind1_),
        kind2_(encoder->kind2_),
        history_(encoder->history_),
        run_count_(encoder->run_count_),
        run_at_(encoder->run_at_) {}
  // `zero_args`: how many args the kind has after `arg`, all 0 (a compact ring event of a kind of
  // several args: MpiEnter without its site).
  [[gnu::always_inline]] void Put(uint16_t kind,
                                  uint64_t ts,
                                  uint64_t arg,
                                  unsigned zero_args = 0) {
    if (n_ == 0)
      first_ts_ = ts;
    if (history_ == 2) [[likely]] {
      if (kind == kind2_ && arg == arg2_ && PutTwoBackAgain(ts))
        return;
      if (kind == kind1_ && arg == arg1_ && PutOneBackAgain(ts))
        return;
    }
    const uint64_t delta = ts - prev_ts_;
    Advance(ts);
    EndRun();
    uint8_t* p = PutVarint(p_, kind);
    p = PutVarint(p, ZigZag(static_cast<int64_t>(delta)));
    p = PutVarint(p, arg);
    for (unsigned i = 0; i < zero_args; ++i)
      *p++ = 0;
    p_ = p;
    kind2_ = kind1_;
    arg2_ = arg1_;
    kind1_ = kind;
    arg1_ = arg;
    history_ = std::min(history_ + 1, 2);
  }
  // For a caller that knows the event is the same (kind, arg) as the one two back, or one back, of
  // what it Put last (the recorder's drain compares ring words, two Puts after it began): the
  // event as Put writes it, cheaper, when it comes within 127 ns; else false and nothing written.
  [[gnu::always_inline]] bool PutTwoBackAgain(uint64_t ts) {
    const uint64_t delta = ts - prev_ts_;
    if (delta >= 128)
      return false;
    Repeat(static_cast<uint8_t>(delta));
    std::swap(kind1_, kind2_);
    std::swap(arg1_, arg2_);
    Advance(ts);
    return true;
  }
  [[gnu::always_inline]] bool PutOneBackAgain(uint64_t ts) {
    const uint64_t delta = ts - prev_ts_;
    if (delta >= 128)
      return false;
    Repeat(static_cast<uint8_t>(0x80 | delta));
    kind2_ = kind1_;
    arg2_ = arg1_;
    Advance(ts);
    return true;
  }
  // Commits the run; returns the number of events put. A repeat run stays open for the next
  // appender of this encoder, its count so far written.
  uint32_t Done() {
    WriteRunCount();
    StreamEncoder& e = *encoder_;
    e.buf_.Commit(p_);
    if (n_ > 0) {
      if (e.count_ == 0)
        e.first_ts_ = first_ts_;
      e.prev_ts_ = prev_ts_;
      e.last_ts_ = last_ts_;
      e.count_ += n_;
    }
    e.kind1_ = kind1_;
    e.kind2_ = kind2_;
    e.arg1_ = arg1_;
    e.arg2_ = arg2_;
    e.history_ = history_;
    e.run_count_ = run_count_;
    e.run_at_ = run_at_;
    return n_;
  }

 private:
  // A normal event's three varints, or a run's header and first code byte.
  static constexpr size_t kMaxBytes = 32;
  static constexpr uint32_t kMaxRun = (1u << 21) - 1;  // what a 3-byte varint holds

  void Advance(uint64_t ts) {
    ++n_;
    prev_ts_ = ts;
    last_ts_ = std::max(last_ts_, ts);
  }
  void Repeat(uint8_t code) {
    if (run_count_ == 0 || run_count_ == kMaxRun) [[unlikely]]
      BeginRun();
    *p_++ = code;
    ++run_count_;
  }
  void BeginRun() {
    EndRun();
    *p_++ = 0;  // the REPEAT RUN kind
    run_at_ = static_cast<size_t>(p_ - base_);
    p_ += 3;  // the count, written when the run ends or Done() is called
    p_ = PutVarint(p_, kind2_);
    p_ = PutVarint(p_, arg2_);
    p_ = PutVarint(p_, kind1_);
    p_ = PutVarint(p_, arg1_);
  }
  void EndRun() {
    WriteRunCount();
    run_count_ = 0;
  }
  void WriteRunCount() {
    if (run_count_ == 0)
      return;
    uint8_t* c = base_ + run_at_;
    c[0] = static_cast<uint8_t>(0x80 | (run_count_ & 0x7f));
    c[1] = static_cast<uint8_t>(0x80 | ((run_count_ >> 7) & 0x7f));
    c[2] = static_cast<uint8_t>(run_count_ >> 14);
  }

  StreamEncoder* encoder_;
  uint8_t* p_;
  uint8_t* base_;  // the encoder's buffer start (stable while this appender lives)
  uint64_t prev_ts_, last_ts_, first_ts_ = 0;
  uint64_t arg1_, arg2_;
  uint16_t kind1_, kind2_;
  int history_;
  uint32_t run_count_;
  size_t run_at_;
  uint32_t n_ = 0;
};

// Describes kinds while decoding: the compiled-in table, overridden by a file's SCHEMA chunk.
class KindSchema {
 public:
  KindSchema();  // the compiled-in table
  // One shared copy of the compiled-in table: readers of files whose SCHEMA chunk says nothing
  // else point here instead of holding their own (a session of thousands of rank files).
  static const std::shared_ptr<const KindSchema>& Builtin();
  // False (nothing set) when delta_mask names a kind beyond the kMaxDeltaKinds a decoder keeps,
  // or args that are also times.
  bool Set(uint16_t id,
           uint8_t nargs,
           bool has_payload,
           uint32_t time_mask,
           std::string name,
           std::string arg_names,
           uint32_t delta_mask = 0);
  bool Known(uint16_t id) const { return id < entries_.size() && entries_[id].known; }
  uint8_t nargs(uint16_t id) const { return entry(id).nargs; }
  bool has_payload(uint16_t id) const { return entry(id).has_payload; }
  // What a decoder needs of a kind, in one byte: kBriefKnown | kBriefPayload | kBriefTimes (some
  // arg is a time: time_mask() is not 0) | kBriefDeltas (some arg is a difference: delta_mask()
  // is not 0) | nargs.
  static constexpr uint8_t kBriefKnown = 0x80, kBriefPayload = 0x40, kBriefTimes = 0x20,
                           kBriefDeltas = 0x10, kBriefArgs = 0x0f;
  uint8_t brief(uint16_t id) const { return brief_[id]; }
  uint32_t time_mask(uint16_t id) const { return entry(id).time_mask; }    // args that are times
  uint32_t delta_mask(uint16_t id) const { return entry(id).delta_mask; }  // args as differences
  // Where a decoder keeps the kind's previous args (< kMaxDeltaKinds when delta_mask() is not 0).
  uint8_t delta_slot(uint16_t id) const { return entry(id).delta_slot; }
  const std::string& name(uint16_t id) const { return entry(id).name; }
  const std::string& arg_names(uint16_t id) const { return entry(id).arg_names; }
  // Both describe the same kinds the same way.
  bool operator==(const KindSchema& other) const { return entries_ == other.entries_; }

 private:
  struct Entry {
    bool known = false;
    uint8_t nargs = 0;
    bool has_payload = false;
    uint32_t time_mask = 0;
    std::string name;
    std::string arg_names;
    uint32_t delta_mask = 0;
    uint8_t delta_slot = kNoDeltaSlot;  // kept by the id once given, whatever the mask becomes
    bool operator==(const Entry&) const = default;
  };
  const Entry& entry(uint16_t id) const { return id < entries_.size() ? entries_[id] : kUnknown; }
  static const Entry kUnknown;
  // Up to the largest id set (~200 entries, not 65,536: 4.7 MB per reader was the issue-19
  // cost of a rank file); ids past it are unknown.
  std::vector<Entry> entries_;
  std::vector<uint8_t> brief_;  // by id, see brief(): 64 KiB the decoder's hot loop reads
  uint8_t delta_slots_ = 0;     // slots given out
};

// Encodes the compiled-in kind table (the SCHEMA chunk's payload).
void EncodeSchema(ByteBuffer* out);
// Decodes a SCHEMA payload into schema; false when it is malformed.
bool DecodeSchema(const uint8_t* p, size_t n, KindSchema* schema);

// Decodes an EVENTS payload one event at a time, for readers that keep only the next event of
// each stream (the analysis engine's merge) instead of a whole chunk of 96-byte Events.
// Payload views point into [p, p+n).
class EventDecoder {
 public:
  EventDecoder() = default;
  // `coding`: the chunk header's kChunkRelativeTimes (3.0) and kChunkArgDeltas (4.0) flags
  // (ChunkCoding); 0 for a chunk of an older file.
  EventDecoder(const uint8_t* p,
               size_t n,
               uint32_t location,
               Source source,
               const KindSchema* schema,
               uint8_t coding = 0)
      : begin_(p),
        p_(p),
        end_(p + n),
        location_(location),
        source_(source),
        schema_(schema),
        coding_(coding) {}
  // The next event into *e, or false at the end of the payload or when it is malformed (then
  // error() says why and where).
  bool Next(Event* e) {
    if (run_left_ > 0)
      return Repeated(e);
    // Away from the payload's end every varint of the event is readable without bound checks.
    if (end_ - p_ >= kFastBytes) [[likely]]
      return Decode<true>(e);
    if (p_ >= end_)
      return false;
    return Decode<false>(e);
  }
  const std::string& error() const { return error_; }

 private:
  // Kind, time delta, the args and a payload length, each at most kMaxVarintBytes.
  static constexpr ptrdiff_t kFastBytes = (3 + kMaxArgs) * kMaxVarintBytes;
  // A varint that may use up to kMaxVarintBytes past p; nullptr when it is longer.
  static const uint8_t* GetVarintUnchecked(const uint8_t* p, uint64_t* v) {
    uint64_t byte = *p;
    if (byte < 0x80) [[likely]] {
      *v = byte;
      return p + 1;
    }
    uint64_t result = byte & 0x7f;
    for (int shift = 7; shift <= 63; shift += 7) {
      byte = *++p;
      result |= (byte & 0x7f) << shift;
      if (byte < 0x80) {
        *v = result;
        return p + 1;
      }
    }
    return nullptr;
  }
  template <bool kUnchecked>
  const uint8_t* Get(const uint8_t* p, uint64_t* v) const {
    return kUnchecked ? GetVarintUnchecked(p, v) : GetVarint(p, end_, v);
  }
  // One event; kUnchecked when at least kFastBytes remain (a tenth of decoding on MPI traces,
  // bench/report_bench), so only the payload needs checking against the end.
  template <bool kUnchecked>
  bool Decode(Event* e) {
    const uint8_t* start = p_;
    uint64_t kind, delta;
    const uint8_t* p = Get<kUnchecked>(p_, &kind);
    if (p && kind == 0)
      return BeginRun<kUnchecked>(p, start, e);
    if (!p || !(p = Get<kUnchecked>(p, &delta)))
      return Fail("event header truncated", start);
    const uint8_t brief = kind > 0xffff ? 0 : schema_->brief(static_cast<uint16_t>(kind));
    if (!(brief & KindSchema::kBriefKnown))
      return Fail("unknown event kind " + std::to_string(kind), start);
    e->location = location_;
    e->source = source_;
    e->kind = static_cast<uint16_t>(kind);
    e->ts = prev_ts_ + static_cast<uint64_t>(UnZigZag(delta));
    const int nargs = brief & KindSchema::kBriefArgs;
    e->nargs = static_cast<uint8_t>(nargs);
    for (int i = 0; i < nargs; ++i)
      if (!(p = Get<kUnchecked>(p, &e->args[i])))
        return Fail("event args truncated", start);
    if (brief & (KindSchema::kBriefTimes | KindSchema::kBriefDeltas)) [[unlikely]]
      WholeArgs(e, brief);
    e->payload = {};
    if (brief & KindSchema::kBriefPayload) {
      uint64_t len;
      if (!(p = Get<kUnchecked>(p, &len)) || len > static_cast<uint64_t>(end_ - p))
        return Fail("event payload truncated", start);
      e->payload = std::string_view(reinterpret_cast<const char*>(p), len);
      p += len;
    }
    prev_ts_ = e->ts;
    p_ = p;
    return true;
  }
  // A REPEAT RUN's header (codec.h's top), then its first event.
  template <bool kUnchecked>
  bool BeginRun(const uint8_t* p, const uint8_t* start, Event* e) {
    uint64_t count = 0, k2 = 0, a2 = 0, k1 = 0, a1 = 0;
    if (!(p = Get<kUnchecked>(p, &count)) || !(p = Get<kUnchecked>(p, &k2)) ||
        !(p = Get<kUnchecked>(p, &a2)) || !(p = Get<kUnchecked>(p, &k1)) ||
        !(p = Get<kUnchecked>(p, &a1)))
      return Fail("repeat run header truncated", start);
    if (count == 0 || count > static_cast<uint64_t>(end_ - p))
      return Fail("repeat run of " + std::to_string(count) + " events in " +
                      std::to_string(end_ - p) + " bytes",
                  start);
    // Kinds of at least one arg and no payload (format 2.1: the args after the first are 0).
    uint8_t nargs[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
      const uint64_t k = i == 0 ? k1 : k2;
      const uint8_t brief = k > 0xffff ? 0 : schema_->brief(static_cast<uint16_t>(k));
      nargs[i] = brief & KindSchema::kBriefArgs;
      if (!(brief & KindSchema::kBriefKnown) || (brief & KindSchema::kBriefPayload) ||
          nargs[i] == 0)
        return Fail(
            "repeat run of kind " + std::to_string(k) + ", not a kind of args without a payload",
            start);
    }
    kind1_ = static_cast<uint16_t>(k1);
    kind2_ = static_cast<uint16_t>(k2);
    nargs1_ = nargs[0];
    nargs2_ = nargs[1];
    arg1_ = a1;
    arg2_ = a2;
    run_left_ = static_cast<uint32_t>(count);
    p_ = p;
    return Repeated(e);
  }
  // The next event of the open repeat run: one byte.
  bool Repeated(Event* e) {
    const uint8_t code = *p_++;
    --run_left_;
    e->location = location_;
    e->source = source_;
    e->ts = prev_ts_ + (code & 0x7f);
    e->payload = {};
    if (code & 0x80) {
      kind2_ = kind1_;
      arg2_ = arg1_;
      nargs2_ = nargs1_;
    } else {
      std::swap(kind1_, kind2_);
      std::swap(arg1_, arg2_);
      std::swap(nargs1_, nargs2_);
    }
    e->kind = kind1_;
    e->nargs = nargs1_;
    e->args[0] = arg1_;
    for (int i = 1; i < nargs1_; ++i)
      e->args[i] = 0;
    prev_ts_ = e->ts;
    return true;
  }
  // Format 3.0: the time args were written as zigzag(ts - arg); 4.0: the delta args as
  // zigzag(arg - the kind's previous arg).
  void WholeArgs(Event* e, uint8_t brief) {
    if ((brief & KindSchema::kBriefDeltas) && (coding_ & kChunkArgDeltas)) {
      const uint32_t mask = schema_->delta_mask(e->kind);
      uint64_t* prev = prev_args_[schema_->delta_slot(e->kind)];
      for (int i = 0; i < e->nargs; ++i)
        if (mask & (1u << i))
          e->args[i] = prev[i] += static_cast<uint64_t>(UnZigZag(e->args[i]));
    }
    if ((brief & KindSchema::kBriefTimes) && (coding_ & kChunkRelativeTimes)) {
      const uint32_t mask = schema_->time_mask(e->kind);
      for (int i = 0; i < e->nargs; ++i)
        if (mask & (1u << i))
          e->args[i] = e->ts - static_cast<uint64_t>(UnZigZag(e->args[i]));
    }
  }
  bool Fail(const std::string& what, const uint8_t* at) {
    error_ = what + " at byte " + std::to_string(at - begin_);
    p_ = end_;
    return false;
  }
  const uint8_t* begin_ = nullptr;
  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  uint64_t prev_ts_ = 0;
  // The open repeat run's last two events (set by its header), and its events still to come.
  uint64_t arg1_ = 0, arg2_ = 0;
  uint16_t kind1_ = 0, kind2_ = 0;
  uint8_t nargs1_ = 0, nargs2_ = 0;
  uint32_t run_left_ = 0;
  uint32_t location_ = 0;
  Source source_ = Source::kRuntime;
  const KindSchema* schema_ = nullptr;
  uint8_t coding_ = 0;
  uint64_t prev_args_[kMaxDeltaKinds][kMaxArgs] = {};  // by KindSchema::delta_slot (4.0)
  std::string error_;
};

// Decodes an EVENTS payload. Payload views point into [p, p+n). Returns false (with *error set,
// and the events decoded so far kept) when the payload is malformed.
bool DecodeEvents(const uint8_t* p,
                  size_t n,
                  uint32_t location,
                  Source source,
                  const KindSchema& schema,
                  std::vector<Event>* out,
                  std::string* error,
                  uint8_t coding = 0);

// Key/value pairs of the SESSION chunk.
void EncodeKeyValues(const std::vector<std::pair<std::string, std::string>>& kv, ByteBuffer* out);
bool DecodeKeyValues(const uint8_t* p,
                     size_t n,
                     std::vector<std::pair<std::string, std::string>>* out);

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_CODEC_H_
