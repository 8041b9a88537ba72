// TraceIndex's queries: the duration classes of SliceSet, the cumulative state functions of
// StateSeries and the message search (the design is in trace_index.h).
#include "web/trace_index.h"

#include <algorithm>
#include <bit>
#include <map>
#include <tuple>

namespace parmon::web {

const char* const kStateKeys[kStates] = {"running",    "queued",  "comm_wait", "lock_wait",
                                         "timer_wait", "io_wait", "other"};
const char* const kSliceKindKeys[4] = {"region", "mpi", "wait", "cpu"};

// --- SliceSet ----------------------------------------------------------------------------------

int SliceSet::ClassOf(uint64_t d) {
  return d < 2 ? 0 : 63 - std::countl_zero(d);
}

void SliceSet::Add(const Slice& s) {
  by_class_[ClassOf(s.end - s.begin)].push_back(s);
  ++size_;
}

void SliceSet::AddAll(const std::vector<Slice>& all) {
  std::array<size_t, 64> count{};
  for (const Slice& s : all)
    ++count[ClassOf(s.end - s.begin)];
  for (int c = 0; c < 64; ++c)
    by_class_[c].reserve(by_class_[c].size() + count[c]);
  for (const Slice& s : all)
    Add(s);
}

bool SliceBefore(const Slice& a, const Slice& b) {
  return std::tie(a.begin, a.end, a.depth, a.kind, a.name) <
         std::tie(b.begin, b.end, b.depth, b.kind, b.name);
}

void SliceSet::Finish() {
  for (auto& v : by_class_) {
    if (!std::is_sorted(v.begin(), v.end(), SliceBefore))  // MPI calls and CPU runs come sorted
      std::sort(v.begin(), v.end(), SliceBefore);
    v.shrink_to_fit();
  }
}

void SliceSet::Merge(const std::vector<Slice>& batch) {
  std::array<size_t, 64> old;
  for (int c = 0; c < 64; ++c)
    old[c] = by_class_[c].size();
  for (const Slice& s : batch)
    Add(s);
  for (int c = 0; c < 64; ++c) {
    std::vector<Slice>& v = by_class_[c];
    if (v.size() == old[c])
      continue;
    const auto mid = v.begin() + static_cast<ptrdiff_t>(old[c]);
    std::sort(mid, v.end(), SliceBefore);
    std::inplace_merge(v.begin(), mid, v.end(), SliceBefore);
  }
}

uint64_t SliceSet::Query(uint64_t t0,
                         uint64_t t1,
                         uint64_t min_ns,
                         size_t limit,
                         const std::function<void(const Slice&)>& fn,
                         bool* truncated) const {
  uint64_t hidden = 0;
  size_t visited = 0;
  auto starts_at_or_after = [](const std::vector<Slice>& v, uint64_t t) {
    return std::lower_bound(v.begin(), v.end(), t,
                            [](const Slice& s, uint64_t x) { return s.begin < x; });
  };
  for (int c = 0; c < 64; ++c) {
    const std::vector<Slice>& v = by_class_[c];
    if (v.empty())
      continue;
    const uint64_t lo = c == 0 ? 0 : uint64_t{1} << c;
    const uint64_t hi = c == 63 ? UINT64_MAX : uint64_t{1} << (c + 1);  // durations < hi
    if (hi <= min_ns) {  // all narrower than a pixel: counted, not visited
      hidden += starts_at_or_after(v, t1) - starts_at_or_after(v, t0);
      continue;
    }
    // A slice of this class overlapping [t0, t1) starts after t0 - hi.
    auto it = starts_at_or_after(v, t0 > hi ? t0 - hi : 0);
    for (; it != v.end() && it->begin < t1; ++it) {
      if (it->end <= t0 && !(it->begin == it->end && it->begin == t0))
        continue;
      if (lo < min_ns && it->end - it->begin < min_ns) {
        hidden += it->begin >= t0;
        continue;
      }
      if (visited == limit) {
        *truncated = true;
        return hidden;
      }
      ++visited;
      fn(*it);
    }
  }
  return hidden;
}

// --- StateSeries -------------------------------------------------------------------------------

void StateSeries::Push(uint64_t t, const StateNs& cum) {
  Delta d;
  bool fits = !block_base_.empty();
  for (int s = 0; fits && s < kStates; ++s) {
    const uint64_t off = cum[s] - block_base_.back()[s];
    fits = cum[s] >= block_base_.back()[s] && off <= UINT32_MAX;
    d[s] = static_cast<uint32_t>(off);
  }
  if (!fits) {  // a new block based here
    block_first_.push_back(ts_.size());
    block_base_.push_back(cum);
    d = Delta{};
  }
  ts_.push_back(t);
  delta_.push_back(d);
  last_ = cum;
}

StateNs StateSeries::At(size_t k) const {
  const size_t b =
      std::upper_bound(block_first_.begin(), block_first_.end(), k) - block_first_.begin() - 1;
  StateNs r = block_base_[b];
  for (int s = 0; s < kStates; ++s)
    r[s] += delta_[k][s];
  return r;
}

void StateSeries::AddPiece(uint64_t begin, uint64_t end, const StateNs& rate, uint64_t total) {
  if (!ts_.empty() && begin < ts_.back())
    begin = ts_.back();  // overlapping spans: the earlier one keeps its time
  if (end <= begin || total == 0)
    return;
  if (ts_.empty() || begin > ts_.back())  // a gap (or the first piece): no state in it
    Push(begin, ts_.empty() ? StateNs{} : last_);
  StateNs next = last_;
  const unsigned __int128 len = end - begin;
  for (int s = 0; s < kStates; ++s)
    next[s] += static_cast<uint64_t>(len * rate[s] / total);
  Push(end, next);
}

uint64_t StateSeries::TruncateTo(uint64_t t) {
  const size_t keep = std::upper_bound(ts_.begin(), ts_.end(), t) - ts_.begin();
  ts_.resize(keep);
  delta_.resize(keep);
  while (!block_first_.empty() && block_first_.back() >= keep) {
    block_first_.pop_back();
    block_base_.pop_back();
  }
  last_ = keep ? At(keep - 1) : StateNs{};
  return ts_.empty() ? 0 : ts_.back();
}

StateNs StateSeries::Cumulative(uint64_t t) const {
  size_t from = 0;
  return Cumulative(t, &from);
}

StateNs StateSeries::Cumulative(uint64_t t, size_t* hint) const {
  if (ts_.empty() || t <= ts_.front())
    return StateNs{};
  if (t >= ts_.back())
    return last_;
  // k: the last boundary at or before t, galloping from the hint (the boundary found for the
  // previous, earlier t) and then halving: a few neighbouring reads when buckets hold few
  // boundaries, instead of a search over the whole series for each bucket edge.
  size_t lo = *hint < ts_.size() && ts_[*hint] <= t ? *hint : 0, hi = lo + 1, step = 1;
  while (hi < ts_.size() && ts_[hi] <= t) {
    lo = hi;
    hi = lo + step;
    step *= 2;
  }
  hi = std::min(hi, ts_.size());
  const size_t k = std::upper_bound(ts_.begin() + lo, ts_.begin() + hi, t) - ts_.begin() - 1;
  *hint = k;
  StateNs r = At(k);
  const StateNs next = At(k + 1);
  const unsigned __int128 num = t - ts_[k], den = ts_[k + 1] - ts_[k];
  for (int s = 0; s < kStates; ++s)
    r[s] += static_cast<uint64_t>(num * (next[s] - r[s]) / den);
  return r;
}

StateNs StateSeries::Sum(uint64_t a, uint64_t b) const {
  StateNs r{};
  if (b <= a)
    return r;
  const StateNs x = Cumulative(a), y = Cumulative(b);
  for (int s = 0; s < kStates; ++s)
    r[s] = y[s] - x[s];
  return r;
}

// --- TraceIndex --------------------------------------------------------------------------------

const IndexedLocation* TraceIndex::Find(uint32_t id) const {
  auto it = std::lower_bound(locations_.begin(), locations_.end(), id,
                             [](const IndexedLocation& l, uint32_t x) { return l.id < x; });
  return it != locations_.end() && it->id == id ? &*it : nullptr;
}

std::vector<const Message*> TraceIndex::MessagesIn(uint64_t t0,
                                                   uint64_t t1,
                                                   size_t limit,
                                                   bool* more) const {
  std::vector<const Message*> out;
  *more = false;
  const uint64_t from = t0 > longest_message_ ? t0 - longest_message_ : 0;
  auto it = std::lower_bound(messages_.begin(), messages_.end(), from,
                             [](const Message& m, uint64_t x) { return m.send < x; });
  for (; it != messages_.end() && it->send < t1; ++it) {
    if (it->recv < t0)
      continue;
    if (out.size() == limit) {
      *more = true;
      break;
    }
    out.push_back(&*it);
  }
  return out;
}

std::span<const Message> TraceIndex::SentIn(uint64_t t0, uint64_t t1) const {
  auto by_send = [](const Message& m, uint64_t x) { return m.send < x; };
  auto b = std::lower_bound(messages_.begin(), messages_.end(), t0, by_send);
  auto e = std::lower_bound(b, messages_.end(), std::max(t0, t1), by_send);
  return {b, e};
}

void LinkCheckpoints::Build(const std::vector<Message>& messages) {
  links_.clear();
  link_of_.clear();
  checkpoints_.clear();
  for (const Message& m : messages)
    if (link_of_.emplace(uint64_t{m.from} << 32 | m.to, 0).second)
      links_.emplace_back(m.from, m.to);
  std::sort(links_.begin(), links_.end());
  for (uint32_t l = 0; l < links_.size(); ++l)
    link_of_[uint64_t{links_[l].first} << 32 | links_[l].second] = l;
  // sizeof(LinkSum) * links / stride bytes per message: under one at 64 links per stride.
  stride_ = std::max<size_t>(4096, 64 * links_.size());
  std::vector<LinkSum> sums(links_.size());
  for (uint32_t l = 0; l < links_.size(); ++l) {
    sums[l].from = links_[l].first;
    sums[l].to = links_[l].second;
  }
  for (size_t b = 0;; b += stride_) {
    checkpoints_.insert(checkpoints_.end(), sums.begin(), sums.end());
    if (b >= messages.size())
      break;
    Add(messages, b, std::min(messages.size(), b + stride_), &sums);
  }
}

uint32_t LinkCheckpoints::LinkOf(const Message& m) const {
  return link_of_.find(uint64_t{m.from} << 32 | m.to)->second;
}

void LinkCheckpoints::Add(const std::vector<Message>& messages,
                          size_t b,
                          size_t e,
                          std::vector<LinkSum>* sums) const {
  for (size_t i = b; i < e; ++i)
    (*sums)[LinkOf(messages[i])].Add(messages[i]);
}

void LinkCheckpoints::Before(const std::vector<Message>& messages,
                             size_t k,
                             std::vector<LinkSum>* sums) const {
  const size_t n = links_.size();
  const size_t count = n ? checkpoints_.size() / n : 0;
  if (count == 0) {
    sums->clear();
    return;
  }
  // The nearest checkpoint, then forward (adding) or back (taking away) to k.
  const size_t c = std::min(count - 1, (k + stride_ / 2) / stride_);
  sums->assign(checkpoints_.begin() + static_cast<ptrdiff_t>(c * n),
               checkpoints_.begin() + static_cast<ptrdiff_t>((c + 1) * n));
  const size_t at = std::min(c * stride_, messages.size());  // the last covers them all
  if (at <= k) {
    Add(messages, at, k, sums);
    return;
  }
  for (size_t i = k; i < at; ++i)
    (*sums)[LinkOf(messages[i])].Remove(messages[i]);
}

std::vector<std::vector<LinkSum>> TraceIndex::LinksBefore(
    const std::vector<uint64_t>& edges) const {
  std::vector<std::vector<LinkSum>> out(edges.size());
  auto by_send = [](const Message& m, uint64_t x) { return m.send < x; };
  auto from = messages_.begin();
  size_t prev_k = 0;
  for (size_t i = 0; i < edges.size(); ++i) {
    from = std::lower_bound(from, messages_.end(), edges[i], by_send);
    const size_t k = static_cast<size_t>(from - messages_.begin());
    if (i > 0 && k - prev_k <= link_checkpoints_.stride() / 2) {  // near the previous edge
      out[i] = out[i - 1];
      link_checkpoints_.Add(messages_, prev_k, k, &out[i]);
    } else {
      link_checkpoints_.Before(messages_, k, &out[i]);
    }
    prev_k = k;
  }
  return out;
}

std::vector<LinkSum> TraceIndex::LinksIn(uint64_t t0, uint64_t t1) const {
  std::vector<LinkSum> out;
  const std::span<const Message> sent = SentIn(t0, t1);
  if (sent.size() <= link_checkpoints_.stride()) {  // a pass over them costs less
    std::map<std::pair<uint32_t, uint32_t>, LinkSum> sums;
    for (const Message& m : sent) {
      LinkSum& s = sums[{m.from, m.to}];
      s.from = m.from;
      s.to = m.to;
      s.Add(m);
    }
    for (const auto& [key, s] : sums)
      out.push_back(s);
    return out;
  }
  const auto before = LinksBefore({t0, std::max(t0, t1)});
  for (size_t l = 0; l < before[1].size(); ++l) {
    const LinkSum s = before[1][l].Since(before[0][l]);
    if (s.messages)
      out.push_back(s);
  }
  return out;
}

}  // namespace parmon::web
