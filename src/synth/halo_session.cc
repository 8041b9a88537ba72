#include "synth/halo_session.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "format/codec.h"
#include "format/event.h"
#include "format/kinds.h"
#include "format/session_info.h"
#include "format/string_ids.h"
#include "format/writer.h"

namespace parmon::synth {
namespace {

using format::Event;
using format::Kind;
using format::Source;

// The global time of MPI_Init's entry: far enough from 0 that every host's clock stays positive.
constexpr uint64_t kStart = 100'000'000'000ull;
// Each rank's calls take these few hundred ns; a ping-pong takes 2 latencies and kPongTurn.
constexpr uint64_t kCall = 100;
constexpr uint64_t kPongTurn = 500;
// String ids of the MPI functions, from the rank's own range (format/string_ids.h).
enum Func : uint32_t { kInit, kIrecv, kIsend, kWaitall, kFinalize, kFuncs };
const char* const kFuncNames[kFuncs] = {"MPI_Init", "MPI_Irecv", "MPI_Isend", "MPI_Waitall",
                                        "MPI_Finalize"};

uint32_t FirstStringId(uint32_t rank, uint32_t ranks) {
  return format::RankFirstStringId(rank, ranks);
}

// The simulated run on the global time base.
struct Run {
  uint64_t init_end = 0;   // every rank leaves MPI_Init here
  uint64_t fin_start = 0;  // the first clock ping-pong of MPI_Finalize
  uint64_t fin_end = 0;    // every rank leaves MPI_Finalize here
  uint64_t pong = 0;       // one ping-pong's length
  // Per iteration and rank (index i * ranks + r): compute end (the first MPI_Irecv's entry) and
  // the Waitall's completion.
  std::vector<uint64_t> post, done;
  HaloTruth truth;
};

uint64_t ExtraCompute(const HaloOptions& o, uint32_t rank, uint32_t it) {
  uint64_t extra = 0;
  if (o.late_every && it % o.late_every == o.late_every - 1 &&
      (static_cast<uint64_t>(it / o.late_every) * 7919 + 3) % o.ranks == rank)
    extra += o.late_ns;
  for (const LateSend& l : o.late)
    if (l.rank == rank && l.iteration == it)
      extra += l.extra_ns;
  return extra;
}

StatusOr<Run> Simulate(const HaloOptions& o) {
  if (o.ranks < 2)
    return Status::Error("a halo exchange needs at least 2 ranks");
  if (o.ranks > (1u << 22))
    return Status::Error(fmt::format("{} ranks is more than this generator writes", o.ranks));
  if (o.ranks_per_host == 0)
    return Status::Error("ranks per host must be at least 1");
  const uint32_t n = o.ranks;
  Run run;
  run.pong = 2 * o.latency_ns + o.sync_asymmetry_ns + kPongTurn;
  run.init_end = kStart + 1000 + (n - 1) * run.pong + 1000;
  HaloTruth& t = run.truth;
  t.late_sender_ns.assign(n, 0);
  t.messages_sent.assign(n, 2ull * o.iterations);
  t.clock_offset_ns.resize(n);
  for (uint32_t r = 0; r < n; ++r)
    t.clock_offset_ns[r] = HostOffset(o, r / o.ranks_per_host) - HostOffset(o, 0);
  t.total_messages = 2ull * n * o.iterations;
  run.post.resize(static_cast<size_t>(n) * o.iterations);
  run.done.resize(run.post.size());
  std::vector<uint64_t> start(n, run.init_end + 2 * kCall);
  for (uint32_t it = 0; it < o.iterations; ++it) {
    uint64_t* post = &run.post[static_cast<size_t>(it) * n];
    uint64_t* done = &run.done[static_cast<size_t>(it) * n];
    for (uint32_t r = 0; r < n; ++r)
      post[r] = start[r] + o.compute_ns + ExtraCompute(o, r, it);
    for (uint32_t r = 0; r < n; ++r) {
      // Sends start 4 and 6 calls after the compute (left, then right); the Waitall at 8.
      const uint64_t from_left = post[(r + n - 1) % n] + 6 * kCall;
      const uint64_t from_right = post[(r + 1) % n] + 4 * kCall;
      const uint64_t wait = post[r] + 8 * kCall;
      const uint64_t last_send = std::max(from_left, from_right);
      done[r] = std::max(wait + kCall / 2, last_send + o.latency_ns);
      // The analysis charges the Waitall from its entry to the later send's start.
      if (last_send > wait)
        t.late_sender_ns[r] += last_send - wait;
      start[r] = done[r] + 3 * kCall;
    }
  }
  run.fin_start = *std::max_element(start.begin(), start.end()) + 1000;
  run.fin_end = run.fin_start + (n - 1) * run.pong + 1000;
  for (uint64_t v : t.late_sender_ns)
    t.total_late_sender_ns += v;
  // Per rank: MPI_Init (enter, init, leave), 16 per iteration, MPI_Finalize (enter, leave), and
  // one clock sync per epoch (rank 0: one per other rank).
  t.events = static_cast<uint64_t>(n) * (5 + 16ull * o.iterations) + 2ull * 2 * (n - 1);
  return run;
}

Event Make(Kind kind, uint64_t ts, std::initializer_list<uint64_t> args) {
  Event e;
  e.ts = ts;
  e.kind = static_cast<uint16_t>(kind);
  e.nargs = static_cast<uint8_t>(args.size());
  size_t i = 0;
  for (uint64_t a : args)
    e.args[i++] = a;
  return e;
}

// Writes one rank's events into its runtime stream, cutting chunks as the recorder does.
class RankWriter {
 public:
  RankWriter(format::TraceWriter* w, uint32_t chunk_bytes, int64_t offset)
      : w_(w), enc_(1, Source::kRuntime), chunk_bytes_(chunk_bytes), offset_(offset) {}
  // t on this rank's clock.
  uint64_t Local(uint64_t global) const {
    return static_cast<uint64_t>(static_cast<int64_t>(global) + offset_);
  }
  Status Add(Kind kind, uint64_t global_ts, std::initializer_list<uint64_t> args) {
    enc_.Append(Make(kind, Local(global_ts), args));
    if (enc_.raw_size() >= chunk_bytes_)
      return w_->Flush(&enc_);
    return Status::Ok();
  }
  Status Finish() { return enc_.count() ? w_->Flush(&enc_) : Status::Ok(); }

 private:
  format::TraceWriter* w_;
  format::StreamEncoder enc_;
  uint32_t chunk_bytes_;
  int64_t offset_;
};

Status WriteDefinitions(format::TraceWriter* w, uint32_t rank, uint32_t ranks) {
  format::StreamEncoder defs(0, Source::kDefinitions);
  const uint32_t first = FirstStringId(rank, ranks);
  auto add = [&](Kind k, std::initializer_list<uint64_t> args, const char* payload) {
    Event e = Make(k, 0, args);
    e.payload = payload;
    defs.Append(e);
  };
  for (uint32_t f = 0; f < kFuncs; ++f)
    add(Kind::kDefString, {first + f, static_cast<uint64_t>(format::StringCategory::kFunction)},
        kFuncNames[f]);
  const uint64_t pid = 100000 + rank;
  add(Kind::kDefProcess, {pid, 1}, "synth_halo");
  add(Kind::kDefLocation, {1, static_cast<uint64_t>(format::LocationType::kThread), pid, pid},
      "synth_halo");
  return w->Flush(&defs);
}

// One ping-pong between rank 0 and `peer` at global time g (docs/events.md, Clock alignment).
Status ClockSync(const Run& run,
                 const HaloOptions& o,
                 RankWriter* rw,
                 uint32_t rank,
                 uint32_t peer,
                 uint64_t epoch,
                 uint64_t g) {
  if (rank == 0) {
    const uint64_t back = g + run.pong;
    return rw->Add(Kind::kMpiClockSync, back, {peer, epoch, rw->Local(g), rw->Local(back)});
  }
  const uint64_t in = g + o.latency_ns + o.sync_asymmetry_ns, out = in + kPongTurn;
  return rw->Add(Kind::kMpiClockSync, out, {0, epoch, rw->Local(out), rw->Local(in)});
}

Status Epoch(const Run& run,
             const HaloOptions& o,
             RankWriter* rw,
             uint32_t rank,
             uint64_t epoch,
             uint64_t first) {
  if (rank != 0)
    return ClockSync(run, o, rw, rank, 0, epoch, first + (rank - 1) * run.pong);
  for (uint32_t peer = 1; peer < o.ranks; ++peer)
    PARMON_RETURN_IF_ERROR(ClockSync(run, o, rw, 0, peer, epoch, first + (peer - 1) * run.pong));
  return Status::Ok();
}

Status WriteIterations(const Run& run, const HaloOptions& o, RankWriter* rw, uint32_t r) {
  const uint32_t n = o.ranks, first = FirstStringId(r, n);
  const uint32_t left = (r + n - 1) % n, right = (r + 1) % n;
  uint64_t request = 1;
  for (uint32_t it = 0; it < o.iterations; ++it) {
    const uint64_t a = run.post[static_cast<size_t>(it) * n + r];
    const uint64_t done = run.done[static_cast<size_t>(it) * n + r];
    const uint64_t recv_left = request++, recv_right = request++;
    for (uint64_t k = 0; k < 2; ++k) {  // MPI_Irecv from the left, then the right
      PARMON_RETURN_IF_ERROR(rw->Add(Kind::kMpiEnter, a + 2 * k * kCall, {first + kIrecv}));
      PARMON_RETURN_IF_ERROR(rw->Add(Kind::kMpiLeave, a + (2 * k + 1) * kCall, {first + kIrecv}));
    }
    for (uint64_t k = 0; k < 2; ++k) {  // MPI_Isend to the left (tag 0), then the right (tag 1)
      const uint64_t s = a + (4 + 2 * k) * kCall, req = request++;
      PARMON_RETURN_IF_ERROR(rw->Add(Kind::kMpiEnter, s, {first + kIsend}));
      PARMON_RETURN_IF_ERROR(
          rw->Add(Kind::kMpiSend, s, {k == 0 ? left : right, k, 1, o.bytes, req}));
      // Completed inside the call (a small message sent inline).
      PARMON_RETURN_IF_ERROR(rw->Add(Kind::kMpiRequestDone, s + kCall, {req, rw->Local(s)}));
      PARMON_RETURN_IF_ERROR(rw->Add(Kind::kMpiLeave, s + kCall, {first + kIsend}));
    }
    PARMON_RETURN_IF_ERROR(rw->Add(Kind::kMpiEnter, a + 8 * kCall, {first + kWaitall}));
    // From the left its rightward message (tag 1), from the right its leftward one (tag 0).
    PARMON_RETURN_IF_ERROR(
        rw->Add(Kind::kMpiRecv, done, {left, 1, 1, o.bytes, recv_left, rw->Local(a)}));
    PARMON_RETURN_IF_ERROR(rw->Add(Kind::kMpiRecv, done,
                                   {right, 0, 1, o.bytes, recv_right, rw->Local(a + 2 * kCall)}));
    PARMON_RETURN_IF_ERROR(rw->Add(Kind::kMpiLeave, done + kCall, {first + kWaitall}));
  }
  return Status::Ok();
}

Status WriteRank(const std::string& dir, const Run& run, const HaloOptions& o, uint32_t r) {
  const uint32_t host = r / o.ranks_per_host;
  const int64_t offset = HostOffset(o, host);
  auto created = format::TraceWriter::Create(fmt::format("{}/rank-{}.ptrace", dir, r));
  if (!created.ok())
    return created.status();
  format::TraceWriter* w = created->get();
  format::SessionInfo s;
  s.parmon_version = "synthetic";
  s.command = fmt::format("synth_halo {} {}", o.ranks, o.iterations);
  s.host = fmt::format("synth-node-{}", host);
  s.start_ts = static_cast<uint64_t>(static_cast<int64_t>(kStart - 1000) + offset);
  s.start_realtime_ns = 1'764'000'000'000'000'000ull;
  s.clock = "synthetic (parmon-synth), offset from host 0's by a known amount";
  s.clock_base = "monotonic";
  s.recorder_pid = 200000 + r;
  s.overflow = "block";
  s.ring_bytes = 4u << 20;
  s.ring_count = 1;
  s.cpus = o.ranks_per_host;
  s.mpi_rank = r;
  s.mpi_size = o.ranks;
  s.extra["launcher"] = "synthetic";
  PARMON_RETURN_IF_ERROR(w->WriteSession(format::EncodeSession(s)));
  PARMON_RETURN_IF_ERROR(WriteDefinitions(w, r, o.ranks));
  RankWriter rw(w, o.chunk_bytes, offset);
  const uint32_t first = FirstStringId(r, o.ranks);
  PARMON_RETURN_IF_ERROR(rw.Add(Kind::kMpiEnter, kStart, {first + kInit}));
  PARMON_RETURN_IF_ERROR(Epoch(run, o, &rw, r, 0, kStart + 1000));
  PARMON_RETURN_IF_ERROR(rw.Add(Kind::kMpiInit, run.init_end, {r, o.ranks, 0}));
  PARMON_RETURN_IF_ERROR(rw.Add(Kind::kMpiLeave, run.init_end + kCall, {first + kInit}));
  PARMON_RETURN_IF_ERROR(WriteIterations(run, o, &rw, r));
  const uint64_t last = run.done[static_cast<size_t>(o.iterations - 1) * o.ranks + r];
  PARMON_RETURN_IF_ERROR(rw.Add(Kind::kMpiEnter, last + 3 * kCall, {first + kFinalize}));
  PARMON_RETURN_IF_ERROR(Epoch(run, o, &rw, r, 1, run.fin_start));
  PARMON_RETURN_IF_ERROR(rw.Add(Kind::kMpiLeave, run.fin_end, {first + kFinalize}));
  PARMON_RETURN_IF_ERROR(rw.Finish());
  format::EndInfo e;
  e.end_ts = rw.Local(run.fin_end + 1000);
  e.exit_code = 0;
  return w->Finish(format::EncodeEnd(e));
}

}  // namespace

int64_t HostOffset(const HaloOptions& o, uint32_t host) {
  int64_t v = 0;
  if (host > 0)
    v = o.host_offset_ns * static_cast<int64_t>(1 + (host - 1) % 5) * (host % 2 ? 1 : -1);
  if (host < o.extra_offset_ns.size())
    v += o.extra_offset_ns[host];
  return v;
}

StatusOr<HaloTruth> SimulateHalo(const HaloOptions& options) {
  auto run = Simulate(options);
  if (!run.ok())
    return run.status();
  return std::move(run->truth);
}

StatusOr<HaloTruth> WriteHaloSession(const std::string& dir, const HaloOptions& options) {
  if (options.iterations == 0)
    return Status::Error("a halo session needs at least one iteration");
  auto run = Simulate(options);
  if (!run.ok())
    return run.status();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Status::Error(fmt::format("cannot create {}: {}", dir, ec.message()));
  std::atomic<uint32_t> next{0};
  std::mutex mu;
  Status failed = Status::Ok();
  auto work = [&] {
    for (uint32_t r; (r = next.fetch_add(1)) < options.ranks;) {
      Status s = WriteRank(dir, *run, options, r);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        failed = s;
        next = options.ranks;
      }
    }
  };
  std::vector<std::thread> threads;
  for (uint32_t i = 1; i < std::max(1u, options.threads); ++i)
    threads.emplace_back(work);
  work();
  for (auto& t : threads)
    t.join();
  if (!failed.ok())
    return failed;
  return std::move(run->truth);
}

}  // namespace parmon::synth
