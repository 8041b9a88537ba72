// Loop clocks: which messages close a loop. A message from S to C closes a loop when S sent it
// only after it had heard, directly or through a chain of messages, of C's latest send before C
// received it: C could not get this input until its own previous output had come back round
// to S. In a loop that hands out work one item at a time (the Hathi-2 ring master's logical
// error) nearly every message to the first stage closes the loop; in a loop kept full it almost
// never does, however the threads are scheduled and whether they block or spin while they wait.
//
// Vector clocks of send counts, one component per location that communicates, copy-on-write:
// a send shares its sender's clock with the message until either changes. MPI messages carry
// the clock of their send; a channel read takes the clock of the write its bytes came from.
#ifndef PARMON_ANALYSIS_LOOP_CLOCKS_H_
#define PARMON_ANALYSIS_LOOP_CLOCKS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

namespace parmon::analysis {

// Vectors shared copy-on-write by messages are recycled when the last message lets go of them,
// so that a copy made on the next send reuses one instead of allocating.
// A shared copy of `from`, in a spare vector nothing else holds when there is one (a snapshot's
// copy of the engine may share the spares: those are left to it).
template <typename T>
std::shared_ptr<T> CopyIntoSpare(std::vector<std::shared_ptr<T>>& spare, const T& from) {
  while (!spare.empty()) {
    std::shared_ptr<T> v = std::move(spare.back());
    spare.pop_back();
    if (v.use_count() == 1) {
      *v = from;
      return v;
    }
  }
  return std::make_shared<T>(from);
}
// Lets go of `v`, keeping its vector as a spare when nothing else holds it.
template <typename T>
void RecycleInto(std::vector<std::shared_ptr<T>>& spare, std::shared_ptr<const T>& v) {
  if (v && v.use_count() == 1 && spare.size() < 64)
    spare.push_back(std::const_pointer_cast<T>(std::move(v)));
  v.reset();
}

class LoopClocks {
 public:
  using Clock = std::vector<uint32_t>;  // by slot: sends known to have happened

  // Locations are the engine's location indices. Beyond max_locations communicating locations
  // the clocks are no longer kept (each send would copy too much) and Receive says false.
  explicit LoopClocks(size_t max_locations = 1024) : max_slots_(max_locations) {}

  bool enabled() const { return enabled_; }

  // A send by `loc`: counts it and returns the clock the message carries.
  std::shared_ptr<const Clock> Send(size_t loc) {
    size_t s = Slot(loc);
    if (!enabled_)
      return nullptr;
    Clock& c = Own(s);
    if (c.size() <= s)
      c.resize(s + 1, 0);
    ++c[s];
    return clocks_[s];
  }

  // A message's clock is let go of: kept for reuse by a later copy when nothing else holds it.
  void Recycle(std::shared_ptr<const Clock>& c) { RecycleInto(spare_, c); }

  // Sends by `loc` so far.
  uint32_t Sent(size_t loc) {
    size_t s = Slot(loc);
    if (!enabled_ || !clocks_[s] || clocks_[s]->size() <= s)
      return 0;
    return (*clocks_[s])[s];
  }

  // `loc` received a message whose send carried `sent`: merges it, and says whether the
  // message closed a loop (`loc` had sent before, and the sender already knew of its last send).
  bool Receive(size_t loc, const std::shared_ptr<const Clock>& sent) {
    return Receive(loc, sent, Sent(loc));
  }
  // The same for a receive that happened when `loc` had sent `own` messages.
  bool Receive(size_t loc, const std::shared_ptr<const Clock>& sent, uint32_t own) {
    size_t s = Slot(loc);
    if (!enabled_ || !sent)
      return false;
    bool closes = own > 0 && sent->size() > s && (*sent)[s] >= own;
    if (Newer(*sent, clocks_[s].get())) {
      Clock& c = Own(s);
      if (c.size() < sent->size())
        c.resize(sent->size(), 0);
      const uint32_t* from = sent->data();
      uint32_t* to = c.data();
      for (size_t i = 0, n = sent->size(); i < n; ++i)
        to[i] = std::max(to[i], from[i]);
    }
    return closes;
  }

  // A byte stream (a pipe, one direction of a socket): a read's bytes came from the writes that
  // covered the same offsets. A read's event often comes before the event of the write it read:
  // the write is timed when its call returns, after the kernel has woken the reader, and on a
  // busy machine the reader runs first. Such a read takes the clock the stream's last writer has
  // now, plus the write it is in: the writer has done nothing since its previous event (its
  // events are in time order and its write began before the read returned). Without a writer
  // seen yet, the read is held until the write's event.
  struct Stream {
    struct Write {
      uint64_t end;  // stream offset after it
      uint32_t writer;
      std::shared_ptr<const Clock> clock;
    };
    struct Read {
      uint64_t end;
      uint32_t reader;
      uint32_t own;  // the reader's sends when it read
    };
    uint64_t written = 0, read = 0;
    int64_t last_writer = -1;
    std::deque<Write> writes;  // that a later read may still need
    std::deque<Read> reads;    // waiting for their write
  };
  // Reads and writes kept per stream at most (a stream whose other end is not recorded).
  static constexpr size_t kMaxStreamBacklog = 1024;

  // `writer` wrote n > 0 bytes to `s`; closed(writer index) is called for each read it
  // completes that closed a loop.
  template <typename Closed>
  void StreamWrite(Stream& s, uint32_t writer, uint64_t n, Closed&& closed) {
    std::shared_ptr<const Clock> clock = Send(writer);
    if (!enabled_)
      return;
    s.written += n;
    if (s.writes.size() >= kMaxStreamBacklog)
      s.writes.pop_front();
    s.writes.push_back({s.written, writer, std::move(clock)});
    s.last_writer = writer;
    while (!s.reads.empty() && s.reads.front().end <= s.written) {
      Deliver(s, s.reads.front(), closed);
      s.reads.pop_front();
    }
  }
  // `reader` read n > 0 bytes from `s`.
  template <typename Closed>
  void StreamRead(Stream& s, uint32_t reader, uint64_t n, Closed&& closed) {
    if (!enabled_)
      return;
    s.read += n;
    Stream::Read r{s.read, reader, Sent(reader)};
    if (r.end <= s.written && s.reads.empty()) {
      Deliver(s, r, closed);
      return;
    }
    if (s.last_writer >= 0 && s.reads.empty()) {
      auto writer = static_cast<uint32_t>(s.last_writer);
      size_t ws = Slot(writer);
      if (!enabled_)
        return;
      auto clock = clocks_[ws] ? std::make_shared<Clock>(*clocks_[ws]) : std::make_shared<Clock>();
      if (clock->size() <= ws)
        clock->resize(ws + 1, 0);
      ++(*clock)[ws];
      if (Receive(reader, clock, r.own))
        closed(writer);
      return;
    }
    if (s.reads.size() >= kMaxStreamBacklog)
      s.reads.pop_front();
    s.reads.push_back(r);
  }

 private:
  // The read's last byte came from the first write that ends at or after it.
  template <typename Closed>
  void Deliver(Stream& s, const Stream::Read& r, Closed& closed) {
    while (!s.writes.empty() && s.writes.front().end < r.end)
      s.writes.pop_front();  // no later read needs these
    if (s.writes.empty())
      return;
    const Stream::Write& w = s.writes.front();
    if (Receive(r.reader, w.clock, r.own))
      closed(w.writer);
  }

  // `sent` has a component greater than `mine`'s (absent ones are 0). Without an early exit or a
  // per-component bound check, so that the compiler vectorises it: a receive compares every
  // communicating location's count (bench/report_bench's halo trace: 17, on every message).
  static bool Newer(const Clock& sent, const Clock* mine) {
    const size_t n = sent.size(), common = mine ? std::min(n, mine->size()) : 0;
    const uint32_t* a = sent.data();
    const uint32_t* b = mine ? mine->data() : nullptr;
    uint32_t newer = 0;
    for (size_t i = 0; i < common; ++i)
      newer |= static_cast<uint32_t>(a[i] > b[i]);
    for (size_t i = common; i < n; ++i)
      newer |= a[i];
    return newer != 0;
  }

  size_t Slot(size_t loc) {
    if (!enabled_)
      return 0;
    if (loc >= slot_of_.size())
      slot_of_.resize(loc + 1, kNoSlot);
    if (slot_of_[loc] == kNoSlot) {
      if (clocks_.size() >= max_slots_) {
        enabled_ = false;
        clocks_.clear();
        return 0;
      }
      slot_of_[loc] = clocks_.size();
      clocks_.emplace_back();
    }
    return slot_of_[loc];
  }
  // The slot's clock, unshared (copied when a message in flight still holds it).
  Clock& Own(size_t s) {
    if (!clocks_[s])
      clocks_[s] = std::make_shared<Clock>();
    else if (clocks_[s].use_count() > 1)
      clocks_[s] = CopyIntoSpare(spare_, *clocks_[s]);
    return *clocks_[s];
  }
  static constexpr size_t kNoSlot = SIZE_MAX;
  size_t max_slots_;
  bool enabled_ = true;
  std::vector<size_t> slot_of_;                 // by location index
  std::vector<std::shared_ptr<Clock>> clocks_;  // by slot
  std::vector<std::shared_ptr<Clock>> spare_;   // let go of by messages (Recycle)
};

}  // namespace parmon::analysis

#endif  // PARMON_ANALYSIS_LOOP_CLOCKS_H_
