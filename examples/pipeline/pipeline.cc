// pipeline: a pipeline of threads connected by channels (bounded queues) in which one stage is
// the bottleneck, after the process-level view of Milner & Choda, "A Process Monitor for the
// Transputer" (seed 000): per process, time active, queued, and waiting on a channel.
//
// Four stages: "source" makes blocks of numbers, "scale" and "hash" transform them, "sink" folds
// them into a checksum. The stage named by --slow does --factor times the work of the others,
// so it runs all the time while the stages before it wait to put (their output channel is full)
// and the stages after it wait to get (their input channel is empty).
//
// Self-check: the sink's per-block checksums equal the ones the main thread recomputes for a
// sample of blocks, and every block arrived once, in order. Counts: per thread "pipe-<stage>",
// regions "work", "put" and "get" (one per block each where the stage has that channel), and
// blocks and bytes sent to and received from the neighbouring stages (peer = stage index).
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/example.h"

namespace {

using parmon_examples::Location;
using parmon_examples::Region;
using parmon_examples::Scope;

constexpr int kStages = 4;
constexpr const char* kStageNames[kStages] = {"source", "scale", "hash", "sink"};
constexpr int kBlockWords = 2048;

struct Block {
  long index = -1;  // -1 ends the stream
  std::vector<uint32_t> words;
};

// A bounded FIFO between two threads: put waits while it is full, get while it is empty.
class Channel {
 public:
  explicit Channel(size_t capacity) : capacity_(capacity) {}
  void Put(Block b) {
    std::unique_lock<std::mutex> lock(mutex_);
    not_full_.wait(lock, [&] { return queue_.size() < capacity_; });
    queue_.push_back(std::move(b));
    not_empty_.notify_one();
  }
  Block Get() {
    std::unique_lock<std::mutex> lock(mutex_);
    not_empty_.wait(lock, [&] { return !queue_.empty(); });
    Block b = std::move(queue_.front());
    queue_.pop_front();
    not_full_.notify_one();
    return b;
  }

 private:
  size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<Block> queue_;
};

void Source(long index, std::vector<uint32_t>& w) {
  parmon_examples::Random random(static_cast<uint64_t>(index) + 1);
  w.resize(kBlockWords);
  for (auto& x : w)
    x = static_cast<uint32_t>(random.Next());
}

void Transform(int stage, long rounds, std::vector<uint32_t>& w) {
  for (long r = 0; r < rounds; ++r)
    for (auto& x : w) {
      x ^= x >> 15;
      x *= 0x2c1b3c6dU + static_cast<uint32_t>(stage);
      x ^= x >> 12;
    }
}

uint64_t Fold(const std::vector<uint32_t>& w) {
  uint64_t h = 1469598103934665603ULL;
  for (uint32_t x : w)
    h = (h ^ x) * 1099511628211ULL;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  parmon_examples::Options options(
      "pipeline",
      "A pipeline of threads joined by bounded channels with one slow stage (seed 000).");
  options.AddInt("blocks", 3000, 1, 100000000, "blocks sent through the pipeline");
  options.AddInt("capacity", 4, 1, 1000000, "blocks each channel holds");
  options.AddChoice("slow", "hash", {"scale", "hash", "sink"}, "the bottleneck stage");
  options.AddInt("factor", 6, 1, 1000, "how many times more work the slow stage does");
  options.AddInt("rounds", 4, 1, 100000, "work per block of an ordinary stage");
  options.Parse(argc, argv);
  const long blocks = options.Int("blocks");
  const long rounds = options.Int("rounds");
  int slow = 0;
  for (int s = 0; s < kStages; ++s)
    if (options.String("slow") == kStageNames[s])
      slow = s;
  auto rounds_of = [&](int stage) {
    return stage == slow ? rounds * options.Int("factor") : rounds;
  };

  std::deque<Channel> channels;  // a deque: channels hold a mutex and cannot move
  for (int c = 0; c < kStages - 1; ++c)
    channels.emplace_back(options.Int("capacity"));
  std::vector<Location> locations(kStages);
  std::vector<uint64_t> sums(static_cast<size_t>(blocks), 0);
  long out_of_order = 0;

  auto stage = [&](int s) {
    static const Region work("work"), put("put"), get("get");
    Location& me = locations[s];
    me.thread = std::string("pipe-") + kStageNames[s];
    parmon_thread_name(me.thread.c_str());
    const uint64_t bytes = kBlockWords * sizeof(uint32_t);
    for (long i = 0;; ++i) {
      Block b;
      if (s == 0) {
        b.index = i < blocks ? i : -1;
      } else {
        Scope sc(me, get);
        b = channels[s - 1].Get();
        me.CountReceive(s - 1, b.index < 0 ? 0 : bytes);
      }
      if (b.index >= 0) {
        Scope sc(me, work);
        if (s == 0)
          Source(b.index, b.words);
        if (s == kStages - 1) {
          Transform(s, rounds_of(s) - 1, b.words);  // the sink's work, then the fold
          if (b.index != i)
            ++out_of_order;
          sums[b.index] = Fold(b.words);
        } else if (s > 0) {
          Transform(s, rounds_of(s), b.words);
        }
      }
      if (s < kStages - 1) {
        Scope sc(me, put);
        bool end = b.index < 0;
        me.CountSend(s + 1, end ? 0 : bytes);
        channels[s].Put(std::move(b));
        if (end)
          break;
      } else if (b.index < 0) {
        break;
      }
    }
  };
  double start = parmon_examples::Now();
  std::vector<std::thread> threads;
  for (int s = 0; s < kStages; ++s)
    threads.emplace_back(stage, s);
  for (auto& t : threads)
    t.join();
  double seconds = parmon_examples::Now() - start;

  // Recompute every 16th block sequentially.
  long wrong = 0, checked = 0;
  for (long i = 0; i < blocks; i += 16, ++checked) {
    std::vector<uint32_t> w;
    Source(i, w);
    for (int s = 1; s < kStages - 1; ++s)
      Transform(s, rounds_of(s), w);
    Transform(kStages - 1, rounds_of(kStages - 1) - 1, w);
    if (Fold(w) != sums[i])
      ++wrong;
  }
  bool ok = wrong == 0 && out_of_order == 0;
  parmon_examples::Report report;
  report.example = "pipeline";
  report.ok = ok;
  report.params = {{"blocks", blocks},
                   {"capacity", options.Int("capacity")},
                   {"slow", kStageNames[slow]},
                   {"factor", options.Int("factor")},
                   {"rounds", rounds}};
  report.results = {{"seconds", seconds},
                    {"blocks_checked", checked},
                    {"blocks_wrong", wrong},
                    {"blocks_out_of_order", out_of_order}};
  for (const Location& l : locations)
    report.locations.push_back(l.ToJson());
  printf("pipeline: %ld blocks through 4 stages (slow: %s x%ld) in %.3f s; %ld checked, %s\n",
         blocks, kStageNames[slow], options.Int("factor"), seconds, checked,
         ok ? "all right" : "WRONG");
  if (!report.Write(options.String("counts")))
    return 1;
  return ok ? 0 : 1;
}
