// The ring protocol under concurrent produce and drain, in one process: real libparmon (loaded
// with dlopen after the segment exists) in producer threads, the recorder's RingDrainer on a
// consumer thread. Small rings force wrap-around, multi-slot events across the ring's end and,
// in block mode, producers waiting for space. Also built and run under ThreadSanitizer.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "format/kinds.h"
#include "recorder/drain.h"
#include "recorder/segment.h"
#include "support/e2e.h"

namespace parmon::recorder {
namespace {

using format::Kind;

struct Api {
  void (*trace_event)(uint32_t);
  int (*trace_data)(uint32_t, const void*, size_t);
  int (*is_active)();
};

// Loads libparmon once, attached to a segment created here (the dynamic loader runs its
// constructor, which maps the segment named in PARMON_SHM).
struct Fixture {
  std::unique_ptr<Segment> segment;
  Api api{};
  void* handle = nullptr;
};

Fixture& Shared(shm::Overflow overflow) {
  static Fixture f;
  if (f.handle)
    return f;
  SegmentOptions so;
  so.ring_bytes = 64 << 10;  // 4096 slots: wraps hundreds of times per thread
  so.ring_count = 16;
  so.overflow = overflow;
  so.ticks_are_tsc = true;
  auto seg = Segment::Create(so);
  EXPECT_TRUE(seg.ok()) << seg.status().message();
  f.segment = std::move(*seg);
  setenv(shm::kEnvSegment, f.segment->name().c_str(), 1);
  std::string lib = parmon::testing::LibDir() + "/libparmon.so";
  f.handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(f.handle, nullptr) << dlerror();
  f.api.trace_event = reinterpret_cast<void (*)(uint32_t)>(dlsym(f.handle, "parmon_trace_event"));
  f.api.trace_data = reinterpret_cast<int (*)(uint32_t, const void*, size_t)>(
      dlsym(f.handle, "parmon_trace_data"));
  f.api.is_active = reinterpret_cast<int (*)()>(dlsym(f.handle, "parmon_is_active"));
  return f;
}

// Checks each thread's stream as it is drained: ids 0,1,2,... in order; every 16th event is a
// trace_data whose payload is the id repeated; timestamps never go back.
class CheckingSink : public DrainSink {
 public:
  void OnCompact(uint16_t kind, uint64_t ts, uint64_t arg) override {
    if (kind != static_cast<uint16_t>(Kind::kTraceEvent))
      return;  // ProcessBegin etc.
    Check(ts, arg);
  }
  void OnEvent(format::Event& e) override {
    if (e.kind != static_cast<uint16_t>(Kind::kTraceData)) {
      if (e.kind == static_cast<uint16_t>(Kind::kLost))
        lost += e.args[0];
      return;
    }
    uint64_t id = e.args[0];
    size_t expect_size = 8 * (1 + id % 7);
    if (e.payload.size() != expect_size)
      ++bad_payloads;
    for (size_t off = 0; off + 8 <= e.payload.size(); off += 8) {
      uint64_t v;
      std::memcpy(&v, e.payload.data() + off, 8);
      if (v != id)
        ++bad_payloads;
    }
    Check(e.ts, id);
  }
  void Check(uint64_t ts, uint64_t id) {
    if (id != next_id)
      ++out_of_order;
    next_id = id + 1;
    if (ts < last_ts)
      ++time_backwards;
    last_ts = ts;
    ++events;
  }
  uint64_t next_id = 0, last_ts = 0, events = 0, out_of_order = 0, time_backwards = 0;
  uint64_t bad_payloads = 0, lost = 0;
};

void Produce(const Api& api, uint64_t n) {
  uint64_t payload[8];
  for (uint64_t i = 0; i < n; ++i) {
    if (i % 16 == 15) {
      for (auto& p : payload)
        p = i;
      api.trace_data(static_cast<uint32_t>(i), payload, 8 * (1 + i % 7));
    } else {
      api.trace_event(static_cast<uint32_t>(i));
    }
  }
}

TEST(Ring, ConcurrentProduceAndDrainLosesNothingInBlockMode) {
  Fixture& f = Shared(shm::Overflow::kBlock);
  ASSERT_NE(f.handle, nullptr);
  ASSERT_EQ(f.api.is_active(), 1);
  constexpr int kThreads = 3;
  constexpr uint64_t kPerThread = 200000;
  TickConversion identity;
  identity.ticks_are_tsc = true;
  std::atomic<bool> producers_done{false};
  std::map<std::pair<uint32_t, uint32_t>, CheckingSink> sinks;  // (ring, generation)
  std::thread consumer([&] {
    RingDrainer drainer(*f.segment);
    for (;;) {
      bool done = producers_done.load(std::memory_order_acquire);
      for (uint32_t i = 0; i < f.segment->header()->ring_count; ++i) {
        shm::RingControl& ctl = f.segment->rings()[i];
        uint32_t st = ctl.state.load(std::memory_order_acquire);
        if (st != shm::kClaimed && st != shm::kRetired)
          continue;
        drainer.Drain(i, identity, sinks[{i, ctl.generation}]);
      }
      if (done)
        break;  // one full pass after the producers finished
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t)
    producers.emplace_back(Produce, f.api, kPerThread);
  for (auto& t : producers)
    t.join();
  producers_done.store(true, std::memory_order_release);
  consumer.join();

  int full_streams = 0;
  for (auto& [key, sink] : sinks) {
    if (sink.events == 0)
      continue;  // the main thread's ring (no trace events)
    SCOPED_TRACE(::testing::Message() << "ring " << key.first);
    EXPECT_EQ(sink.events, kPerThread);
    EXPECT_EQ(sink.out_of_order, 0u);
    EXPECT_EQ(sink.time_backwards, 0u);
    EXPECT_EQ(sink.bad_payloads, 0u);
    EXPECT_EQ(sink.lost, 0u);
    ++full_streams;
  }
  EXPECT_EQ(full_streams, kThreads);
  // Every producer thread retired its ring on exit.
  int retired = 0;
  for (uint32_t i = 0; i < f.segment->header()->ring_count; ++i)
    retired += f.segment->rings()[i].state.load() == shm::kRetired;
  EXPECT_EQ(retired, kThreads);
}

}  // namespace
}  // namespace parmon::recorder
