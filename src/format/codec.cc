#include "format/codec.h"

#include <fmt/format.h>

#include <cstring>

namespace parmon::format {

void StreamEncoder::Append(const Event& e) {
  EndRun();
  // As many args as the kind has (the decoder reads that many): an event made with fewer, such as
  // an MpiEnter without the site it gained later, gets zeros.
  const KindInfo& info = GetKindInfo(e.kind);
  const int nargs = info.name ? info.nargs : e.nargs;
  uint8_t* p = buf_.Reserve((3 + kMaxArgs) * kMaxVarintBytes + e.payload.size());
  p = PutVarint(p, e.kind);
  p = PutVarint(p, ZigZag(static_cast<int64_t>(e.ts - prev_ts_)));
  // Time args relative to the event's time (format 3.0, kChunkRelativeTimes): a wait's begin or
  // a receive's posting is microseconds before the event, a varint of 1-3 bytes instead of 7.
  // Args of a few kinds as differences from the kind's previous event (4.0, kChunkArgDeltas).
  const uint32_t times = info.name ? info.time_mask : 0;
  const uint32_t deltas = info.delta_mask;
  uint64_t* prev = deltas ? prev_args_[info.delta_slot] : nullptr;
  delta_kinds_used_ |= deltas != 0;
  for (int i = 0; i < nargs; ++i) {
    const uint64_t v = i < e.nargs ? e.args[i] : 0;
    if (deltas & (1u << i)) {
      p = PutVarint(p, ZigZag(static_cast<int64_t>(v - prev[i])));
      prev[i] = v;
    } else {
      p = PutVarint(p, (times & (1u << i)) ? ZigZag(static_cast<int64_t>(e.ts - v)) : v);
    }
  }
  if (info.has_payload) {
    p = PutVarint(p, e.payload.size());
    std::memcpy(p, e.payload.data(), e.payload.size());
    p += e.payload.size();
  }
  buf_.Commit(p);
  Note(e.ts);
}

const KindSchema::Entry KindSchema::kUnknown;

KindSchema::KindSchema() : brief_(65536, 0) {
#define PARMON_SCHEMA_ENTRY_(name_, id_, nargs_, payload_, time_mask_, arg_names_) \
  Set(id_, nargs_, payload_, time_mask_, #name_, arg_names_, GetKindInfo(id_).delta_mask);
  PARMON_EVENT_KINDS(PARMON_SCHEMA_ENTRY_)
#undef PARMON_SCHEMA_ENTRY_
}

const std::shared_ptr<const KindSchema>& KindSchema::Builtin() {
  static const std::shared_ptr<const KindSchema> builtin = std::make_shared<const KindSchema>();
  return builtin;
}

bool KindSchema::Set(uint16_t id,
                     uint8_t nargs,
                     bool has_payload,
                     uint32_t time_mask,
                     std::string name,
                     std::string arg_names,
                     uint32_t delta_mask) {
  uint8_t slot = entry(id).delta_slot;
  if (delta_mask != 0) {
    if ((delta_mask & time_mask) != 0)
      return false;
    if (slot == kNoDeltaSlot) {
      if (delta_slots_ >= kMaxDeltaKinds)
        return false;
      slot = delta_slots_++;
    }
  }
  if (id >= entries_.size())
    entries_.resize(static_cast<size_t>(id) + 1);
  entries_[id] = Entry{
      true, nargs, has_payload, time_mask, std::move(name), std::move(arg_names), delta_mask, slot};
  brief_[id] = static_cast<uint8_t>(
      kBriefKnown | (has_payload ? kBriefPayload : 0) | (time_mask != 0 ? kBriefTimes : 0) |
      (delta_mask != 0 ? kBriefDeltas : 0) | std::min<uint8_t>(nargs, kBriefArgs));
  return true;
}

namespace {

void PutString(ByteBuffer* out, std::string_view s) {
  uint8_t* p = out->Reserve(kMaxVarintBytes);
  out->Commit(PutVarint(p, s.size()));
  out->Append(s.data(), s.size());
}

bool GetString(const uint8_t** p, const uint8_t* end, std::string* s) {
  uint64_t len;
  *p = GetVarint(*p, end, &len);
  if (*p == nullptr || len > static_cast<uint64_t>(end - *p))
    return false;
  s->assign(reinterpret_cast<const char*>(*p), len);
  *p += len;
  return true;
}

}  // namespace

void EncodeSchema(ByteBuffer* out) {
#define PARMON_SCHEMA_ENCODE_(name_, id_, nargs_, payload_, time_mask_, arg_names_) \
  {                                                                                 \
    uint8_t* p = out->Reserve(4 * kMaxVarintBytes);                                 \
    p = PutVarint(p, id_);                                                          \
    p = PutVarint(p, nargs_);                                                       \
    p = PutVarint(p, ((payload_) ? 1 : 0) | GetKindInfo(id_).delta_mask << 8);      \
    p = PutVarint(p, time_mask_);                                                   \
    out->Commit(p);                                                                 \
    PutString(out, #name_);                                                         \
    PutString(out, arg_names_);                                                     \
  }
  PARMON_EVENT_KINDS(PARMON_SCHEMA_ENCODE_)
#undef PARMON_SCHEMA_ENCODE_
}

bool DecodeSchema(const uint8_t* p, size_t n, KindSchema* schema) {
  const uint8_t* end = p + n;
  while (p < end) {
    uint64_t id, nargs, payload, time_mask;
    if (!(p = GetVarint(p, end, &id)) || !(p = GetVarint(p, end, &nargs)) ||
        !(p = GetVarint(p, end, &payload)) || !(p = GetVarint(p, end, &time_mask)))
      return false;
    std::string name, arg_names;
    if (!GetString(&p, end, &name) || !GetString(&p, end, &arg_names))
      return false;
    // The third field: bit 0 a payload, bits 8-15 (4.0) the args written as differences.
    if (id > 0xffff || nargs > kMaxArgs || payload > 0xffff)
      return false;
    if (!schema->Set(static_cast<uint16_t>(id), static_cast<uint8_t>(nargs), (payload & 1) != 0,
                     static_cast<uint32_t>(time_mask), std::move(name), std::move(arg_names),
                     static_cast<uint32_t>(payload >> 8)))
      return false;
  }
  return true;
}

bool DecodeEvents(const uint8_t* p,
                  size_t n,
                  uint32_t location,
                  Source source,
                  const KindSchema& schema,
                  std::vector<Event>* out,
                  std::string* error,
                  uint8_t coding) {
  EventDecoder decoder(p, n, location, source, &schema, coding);
  // Decoded in place (no copy of the 96-byte Event); the last one is removed again on damage.
  while (decoder.Next(&out->emplace_back())) {
  }
  out->pop_back();
  if (!decoder.error().empty()) {
    *error = decoder.error();
    return false;
  }
  return true;
}

void EncodeKeyValues(const std::vector<std::pair<std::string, std::string>>& kv, ByteBuffer* out) {
  for (const auto& [k, v] : kv) {
    PutString(out, k);
    PutString(out, v);
  }
}

bool DecodeKeyValues(const uint8_t* p,
                     size_t n,
                     std::vector<std::pair<std::string, std::string>>* out) {
  const uint8_t* end = p + n;
  while (p < end) {
    std::string k, v;
    if (!GetString(&p, end, &k) || !GetString(&p, end, &v))
      return false;
    out->emplace_back(std::move(k), std::move(v));
  }
  return true;
}

std::string DescribeEvent(const Event& e) {
  const KindInfo& info = GetKindInfo(e.kind);
  std::string s = fmt::format("{} loc={} {}", e.ts, e.location,
                              info.name ? info.name : fmt::format("kind{}", e.kind));
  for (int i = 0; i < e.nargs; ++i)
    s += fmt::format(" {}", e.args[i]);
  if (!e.payload.empty())
    s += fmt::format(" [{} bytes]", e.payload.size());
  return s;
}

}  // namespace parmon::format
