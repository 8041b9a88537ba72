#include "recorder/collector.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "format/reader.h"

namespace parmon::recorder {

using format::Event;
using format::Kind;
using format::Source;

namespace {

// Routes drained events to the thread's stream, cutting a chunk whenever the stream's encoded
// bytes reach the limit (a single drain may move a whole ring); definitions and names go to the
// definitions stream through `special`.
template <typename Special, typename Cut>
class StreamRouter {
 public:
  StreamRouter(format::StreamEncoder* encoder, uint64_t limit, Special special, Cut cut)
      : encoder_(encoder), limit_(limit), special_(special), cut_(cut) {}
  void OnCompact(uint16_t kind, uint64_t ts, uint64_t arg) {
    encoder_->AppendOneArg(kind, ts, arg);
    if (encoder_->raw_size() >= limit_) [[unlikely]]
      cut_();
  }
  void OnEvent(Event& e) {
    special_(e);
    if (encoder_->raw_size() >= limit_)
      cut_();
  }
  // RingDrainer's runs of compact events (drain.h: RunSink).
  format::StreamEncoder* encoder() { return encoder_; }
  void AfterRun() {
    if (encoder_->raw_size() >= limit_)
      cut_();
  }

 private:
  format::StreamEncoder* encoder_;
  uint64_t limit_;
  Special special_;
  Cut cut_;
};

// In front of a StreamRouter while `parmon ctl threads|streams` selects: drops the events the
// selection in force at their time leaves out (control.h), keeps the rest.
template <typename Inner>
class SelectingRouter {
 public:
  SelectingRouter(Inner& inner, const Control::ThreadSelection& selection)
      : inner_(inner), selection_(selection) {}
  void OnCompact(uint16_t kind, uint64_t ts, uint64_t arg) {
    if (selection_.Keep(kind, ts))
      inner_.OnCompact(kind, ts, arg);
  }
  void OnEvent(Event& e) {
    if (selection_.Keep(e.kind, e.ts))
      inner_.OnEvent(e);
  }

 private:
  Inner& inner_;
  Control::ThreadSelection selection_;
};

}  // namespace

Collector::Collector(CollectorOptions options,
                     Segment& segment,
                     format::TraceWriter& writer,
                     const TickConversion& clock)
    : options_(std::move(options)),
      segment_(segment),
      writer_(writer),
      clock_(clock),
      drainer_(segment),
      flight_(options_.flight_bytes),
      cursors_(segment.header()->ring_count) {
  // A flight recorder evicts whole chunks: keep them small against its budget.
  if (options_.overflow == shm::Overflow::kOverwrite)
    chunk_bytes_ = std::clamp<uint64_t>(options_.flight_bytes / 16, 4096, chunk_bytes_);
}

format::StreamEncoder* Collector::EncoderFor(uint32_t location, Source source) {
  uint64_t key = uint64_t{location} << 8 | static_cast<uint8_t>(source);
  auto& slot = encoders_[key];
  if (!slot)
    slot = std::make_unique<format::StreamEncoder>(location, source);
  return slot.get();
}

uint32_t Collector::DefineLocation(format::LocationType type,
                                   uint32_t pid,
                                   uint32_t id,
                                   std::string name) {
  const uint32_t loc = next_location_++;
  Event d;
  d.kind = static_cast<uint16_t>(Kind::kDefLocation);
  d.nargs = 4;
  d.args[0] = loc;
  d.args[1] = static_cast<uint64_t>(type);
  d.args[2] = pid;
  d.args[3] = id;
  d.payload = name;
  d.ts = clock_.NowNs();
  AppendDefinition(d);
  return loc;
}

uint32_t Collector::ThreadLocation(uint32_t pid, uint32_t tid) {
  auto [it, inserted] = thread_locations_.emplace(std::make_pair(pid, tid), next_location_);
  if (!inserted)
    return it->second;
  std::string name = options_.thread_name ? options_.thread_name(pid, tid) : std::string();
  // A name read just now is newer than any rename a source still holds; none is older than any.
  thread_names_[it->second] = {name, name, name.empty() ? 0 : clock_.NowNs()};
  return DefineLocation(format::LocationType::kThread, pid, tid, std::move(name));
}

void Collector::RenameThread(uint32_t pid, uint32_t tid, const std::string& name, uint64_t ts) {
  if (name.empty())
    return;
  const uint32_t loc = ThreadLocation(pid, tid);
  // The sources deliver late and out of order (switch records 20 ms behind, rings in index
  // order): a name older than the one the location has is not taken.
  // A kernel name it had already is no change: the name the program chose with
  // parmon_thread_name stays.
  NameAt& known = thread_names_[loc];
  if (ts < known.ts || known.kernel == name)
    return;
  known.ts = ts;
  known.kernel = name;
  if (known.shown == name)
    return;
  known.shown = name;
  Event d;
  d.kind = static_cast<uint16_t>(Kind::kDefLocation);
  d.nargs = 4;
  d.args[0] = loc;
  d.args[1] = static_cast<uint64_t>(format::LocationType::kThread);
  d.args[2] = pid;
  d.args[3] = tid;
  d.payload = name;
  d.ts = clock_.NowNs();
  AppendDefinition(d);
}

uint32_t Collector::CpuLocation(uint32_t cpu) {
  auto [it, inserted] = cpu_locations_.emplace(cpu, next_location_);
  if (!inserted)
    return it->second;
  return DefineLocation(format::LocationType::kCpu, 0, cpu, fmt::format("cpu{}", cpu));
}

void Collector::NoteProcess(uint32_t pid, uint32_t ppid, const std::string& command) {
  auto [it, inserted] = processes_.emplace(pid, ppid);
  if (!inserted && command.empty())
    return;
  Event d;
  d.kind = static_cast<uint16_t>(Kind::kDefProcess);
  d.nargs = 2;
  d.args[0] = pid;
  d.args[1] = ppid;
  d.payload = command;
  d.ts = clock_.NowNs();
  AppendDefinition(d);
}

void Collector::Append(uint32_t location, Source source, const Event& e) {
  ++events_seen_;
  EncoderFor(location, source)->Append(e);
}

void Collector::WriteWatermark(uint64_t drained_at, uint64_t session_start) {
  constexpr uint64_t kWatermarkSlackNs = 50'000'000;
  if (options_.overflow == shm::Overflow::kOverwrite || write_failed_ ||
      drained_at <= session_start + kWatermarkSlackNs)
    return;
  Status s = writer_.WriteWatermark(drained_at - kWatermarkSlackNs);
  if (!s.ok())
    NoteWriteError(s);
}

void Collector::NoteWriteError(const Status& s) {
  if (write_failed_)
    return;
  write_failed_ = true;
  write_error_ = s.message();
  fmt::print(stderr,
             "\nparmon record: {}\nparmon record: the program keeps running; what was written "
             "before this point is intact, and the events from here on are counted as lost\n",
             s.message());
}

void Collector::FlushEncoder(format::StreamEncoder* enc) {
  if (enc->count() == 0)
    return;
  if (write_failed_) {
    CountUnwritten(enc->location(), enc->source(), enc->count() - TakeLostRecords(enc));
    enc->Reset();
    return;
  }
  if (options_.overflow == shm::Overflow::kOverwrite && enc->source() != Source::kDefinitions) {
    // Flight recorder: keep the newest encoded bytes in memory; write them at the end.
    PendingLost& pending = lost_in_encoder_[enc];
    flight_.Hold(HeldChunk{enc->location(), enc->source(), enc->first_ts(), enc->last_ts(),
                           enc->count(), pending.count, pending.records,
                           std::vector<uint8_t>(enc->bytes().data(),
                                                enc->bytes().data() + enc->bytes().size())},
                 &ledger_);
    pending = PendingLost{};
    enc->Reset();
    return;
  }
  // Lost records are reports, not the program's events: their counts are in the ledger already.
  const uint64_t count = enc->count() - TakeLostRecords(enc);
  const uint32_t location = enc->location();
  const Source source = enc->source();
  Status s = writer_.Flush(enc);
  if (!s.ok()) {
    // The chunk was refused (or cut off): its events are lost like the ones after it.
    NoteWriteError(s);
    CountUnwritten(location, source, count);
  }
}

uint64_t Collector::TakeLostRecords(const format::StreamEncoder* enc) {
  auto it = lost_in_encoder_.find(enc);
  if (it == lost_in_encoder_.end())
    return 0;
  const uint64_t records = it->second.records;
  it->second = PendingLost{};
  return std::min<uint64_t>(records, enc->count());
}

void Collector::CountUnwritten(uint32_t location, Source source, uint64_t count) {
  if (source == Source::kDefinitions) {
    definitions_unwritten_ += count;
    return;
  }
  events_unwritten_ += count;
  ledger_.Add(location, count);
}

void Collector::FlushAll() {
  // Definitions first, so a reader of a file cut short has the names its events refer to.
  FlushEncoder(&defs_);
  // A stream with nothing since the last flush is idle (often: its thread has ended). Its
  // buffer, up to twice the chunk size, is freed, or a recorder of threads that come and go
  // would keep one per thread that ever ran (570 KiB each for busy ones: tests/stress).
  for (auto& [key, enc] : encoders_) {
    if (enc->count() == 0)
      enc->ResetAndRelease();
    else
      FlushEncoder(enc.get());
  }
}

void Collector::NameAnnouncedProcess(uint32_t pid,
                                     uint32_t tid,
                                     uint32_t location,
                                     const Event& e) {
  // A process is announced at fork and again after each exec, under a new name: the kernel's
  // name now (never an older one). One already gone is named by what it was running: in its
  // parent's image (its command line is the parent's) by the name it inherited, the parent's;
  // after an exec by its command.
  if (!options_.thread_name)
    return;
  std::string comm = options_.thread_name(pid, tid);
  const uint64_t ts = comm.empty() ? e.ts : clock_.NowNs();  // when the name was true
  const uint32_t ppid = static_cast<uint32_t>(e.args[1]);
  const bool parents_image = commands_.count(ppid) && commands_[ppid] == e.payload;
  std::string& last_command = commands_[pid];
  const bool changed = last_command != e.payload;
  last_command = std::string(e.payload);
  if (comm.empty() && pid == tid && (changed || thread_names_[location].shown.empty())) {
    // The parent's name now (it usually waits for the child), not the one we hold: a rename
    // of the parent before the fork may still be on its way from the switch records.
    if (parents_image)
      comm = options_.thread_name(ppid, ppid);
    auto parent = thread_locations_.find({ppid, ppid});
    if (comm.empty() && parents_image && parent != thread_locations_.end())
      comm = thread_names_[parent->second].shown;
    if (comm.empty())
      comm = format::CommandName(e.payload);
  }
  // The rings of two images may drain out of order: RenameThread takes no older name.
  RenameThread(pid, tid, comm, ts);
}

void Collector::HandleSpecial(RingCursor& cur, shm::RingControl& ctl, Event& e) {
  switch (e.kind_enum()) {
    case Kind::kDefString:
      AppendDefinition(e);
      break;
    case Kind::kThreadName: {
      Event d;
      d.kind = static_cast<uint16_t>(Kind::kDefLocation);
      d.nargs = 4;
      d.args[0] = cur.location;
      d.args[1] = static_cast<uint64_t>(format::LocationType::kThread);
      d.args[2] = ctl.pid;
      d.args[3] = ctl.tid;
      d.payload = e.payload;
      d.ts = e.ts;
      AppendDefinition(d);
      thread_names_[cur.location].shown = std::string(e.payload);
      thread_names_[cur.location].ts = std::max(thread_names_[cur.location].ts, e.ts);
      cur.encoder->Append(e);
      break;
    }
    case Kind::kProcessBegin:
      NoteProcess(static_cast<uint32_t>(e.args[0]), static_cast<uint32_t>(e.args[1]),
                  std::string(e.payload));
      NameAnnouncedProcess(ctl.pid, ctl.tid, cur.location, e);
      cur.encoder->Append(e);
      break;
    case Kind::kLost:
      cur.lost_reported += e.args[0];
      ledger_.Add(cur.location, e.args[0]);
      lost_in_encoder_[cur.encoder].count += e.args[0];
      lost_in_encoder_[cur.encoder].records += 1;
      cur.encoder->Append(e);
      break;
    default:
      cur.encoder->Append(e);
      break;
  }
}

size_t Collector::DrainRing(uint32_t index) {
  shm::RingControl& ctl = segment_.rings()[index];
  // Acquire pairs with the producer's release store of Claimed/Retired: pid/tid are visible, and
  // after Retired the head we load next is final.
  uint32_t state = ctl.state.load(std::memory_order_acquire);
  RingCursor& cur = cursors_[index];
  if (state == shm::kFree || state == shm::kClaiming)
    return 0;
  if (!cur.active || cur.generation != ctl.generation) {
    cur = RingCursor{};
    cur.generation = ctl.generation;
    cur.active = true;
    cur.location = ThreadLocation(ctl.pid, ctl.tid);
    cur.encoder = EncoderFor(cur.location, Source::kRuntime);
  }
  StreamRouter router(
      cur.encoder, chunk_bytes_,
      [&](Event& e) {
        e.location = cur.location;
        e.source = Source::kRuntime;
        HandleSpecial(cur, ctl, e);
      },
      [&] {
        FlushEncoder(&defs_);
        FlushEncoder(cur.encoder);
      });
  uint64_t corrupt_before = drainer_.corruptions();
  size_t n = 0;
  // The head is loaded before the control is read: every event drained now was stamped before
  // that read, so a pause whose time is earlier than an event's is seen by it (and the event
  // dropped; a thread that loaded the enabled word just before a pause may stamp after it).
  const uint64_t head = ctl.head.load(std::memory_order_acquire);
  if (control_ != nullptr && control_->filtering()) {
    SelectingRouter selecting(router, control_->SelectionFor(ctl.tid, clock_));
    n = drainer_.Drain(index, clock_, selecting, head);
  } else {
    n = drainer_.Drain(index, clock_, router, head);
  }
  // A writer waiting for room in this ring goes on now, not after the other rings' drains.
  if (n > 0)
    shm::WakeWaitingWriters(segment_.header());
  if (drainer_.corruptions() != corrupt_before)
    ledger_.Add(cur.location, drainer_.corruptions() - corrupt_before);
  events_seen_ += n;
  // Time the thread waited for room since the last drain (--overflow block): parmon's, not the
  // program's; the END values carry it per location (no event: the program's own event counts,
  // and a flight recorder's or a full disk's loss counts, stay exactly the program's).
  const uint64_t held = ctl.held_ticks.load(std::memory_order_relaxed);
  if (held > cur.held_seen) {
    held_by_location_[cur.location] += clock_.ToNs(held - cur.held_seen) - clock_.ToNs(0);
    cur.held_seen = held;
  }
  if (state == shm::kRetired)
    RetireRing(index);
  return n;
}

void Collector::RetireRing(uint32_t index) {
  shm::RingControl& ctl = segment_.rings()[index];
  RingCursor& cur = cursors_[index];
  uint64_t dropped = ctl.dropped.load(std::memory_order_relaxed);
  if (dropped > cur.lost_reported) {
    // The thread ended while still dropping: the recorder reports the rest.
    const uint64_t n = dropped - cur.lost_reported;
    ledger_.Add(cur.location, n);
    if (options_.overflow == shm::Overflow::kOverwrite) {
      // A flight recorder might evict this report with its chunk: it is written at the end.
      flight_.NoteLateLoss(cur.location, Source::kRuntime, n, clock_.NowNs());
    } else {
      Event e;
      e.kind = static_cast<uint16_t>(Kind::kRingLost);
      e.nargs = 2;
      e.args[0] = n;
      e.args[1] = 0;
      e.ts = clock_.NowNs();
      EncoderFor(cur.location, Source::kRecorder)->Append(e);
      ++events_seen_;
    }
  }
  FlushEncoder(&defs_);
  FlushEncoder(cur.encoder);
  // The thread has ended: its buffer (up to twice the chunk size) goes now, not at the next
  // flush, which a recorder busy draining may reach only after hundreds of threads ended.
  cur.encoder->ResetAndRelease();
  cur.active = false;
  // Release: the next claimer's acquire CAS sees our final tail.
  ctl.state.store(shm::kFree, std::memory_order_release);
}

void Collector::RetireAbandoned(uint32_t index) {
  shm::RingControl& ctl = segment_.rings()[index];
  DrainRing(index);
  if (ctl.state.load(std::memory_order_acquire) == shm::kClaimed) {
    // The thread is gone for good; its committed events are drained above.
    ctl.state.store(shm::kRetired, std::memory_order_release);
    DrainRing(index);
  }
}

size_t Collector::DrainAll() {
  size_t n = 0;
  for (uint32_t i = 0; i < segment_.header()->ring_count; ++i)
    n += DrainRing(i);
  return n;
}

uint64_t Collector::UnreportedDrops() const {
  uint64_t lost = 0;
  for (uint32_t i = 0; i < segment_.header()->ring_count; ++i) {
    const auto& ctl = segment_.rings()[i];
    if (ctl.state.load(std::memory_order_relaxed) == shm::kClaimed && cursors_[i].active) {
      uint64_t d = ctl.dropped.load(std::memory_order_relaxed);
      if (d > cursors_[i].lost_reported)
        lost += d - cursors_[i].lost_reported;
    }
  }
  return lost;
}

void Collector::WriteFlightRecorder(uint64_t start_ns) {
  if (options_.overflow != shm::Overflow::kOverwrite)
    return;
  for (const HeldChunk& h : flight_.held()) {
    Status s = writer_.WriteEncoded(h.location, h.source, h.first_ts, h.last_ts, h.count,
                                    h.bytes.data(), h.bytes.size());
    if (!s.ok()) {
      NoteWriteError(s);
      break;
    }
  }
  for (const auto& [key, loss] : flight_.losses()) {
    const auto [loc, source] = key;
    // Losses of the program's own events go to the recorder's stream of the location, those of
    // the recorder's sources (sampler, switches) to that source's stream: what the window evicted
    // at its start, what a thread lost as it ended when that happened.
    format::StreamEncoder enc(loc, source == Source::kRuntime ? Source::kRecorder : source);
    auto ring_lost = [&](uint64_t n, uint64_t ts) {
      Event e;
      e.kind = static_cast<uint16_t>(Kind::kRingLost);
      e.nargs = 2;
      e.args[0] = n;
      e.args[1] = 0;
      e.ts = ts;
      enc.Append(e);
    };
    if (loss.overwritten + loss.lost_counts > 0)
      ring_lost(loss.overwritten + loss.lost_counts, start_ns);
    if (loss.late > 0)
      ring_lost(loss.late, std::max(loss.late_ts, start_ns));
    if (!write_failed_) {
      Status s = writer_.Flush(&enc);
      if (!s.ok())
        NoteWriteError(s);
    }
  }
}

}  // namespace parmon::recorder
