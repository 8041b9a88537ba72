// IndexBuilder::Publish (index_builder.h): what the events fed so far settled, moved into the
// index; once after the run, or after every refresh of a growing session.
#include <algorithm>

#include "web/index_builder.h"

namespace parmon::web {

namespace {

using namespace build;

constexpr int kRunning = static_cast<int>(format::ThreadState::kRunning);
constexpr int kCommWait = static_cast<int>(format::ThreadState::kCommWait);

StateNs OneState(int s) {
  StateNs r{};
  r[s] = 1;
  return r;
}

// The element of a vector sorted by `key` with that key, inserted in place when absent.
template <class T, class Key>
T& FindOrInsert(std::vector<T>& v, uint32_t id, Key key, bool* added) {
  auto it = std::lower_bound(v.begin(), v.end(), id,
                             [&](const T& x, uint32_t want) { return key(x) < want; });
  *added = it == v.end() || key(*it) != id;
  if (*added)
    it = v.emplace(it);
  return *it;
}

}  // namespace

void IndexBuilder::Publish(bool final, uint64_t start, uint64_t end) {
  index_->start_ = start;
  index_->end_ = std::max(end, start);
  PublishNames();  // first: the slices published below refer to them
  index_->events_ = events_;
  for (auto& [id, l] : raw_)
    if (final || l.touched)
      PublishLocation(id, l, final);
  PublishCpus();
  if (final || messages_changed_)
    FinishMessages(!final);
  if (final) {
    matrices_.Finish();
    index_->matrices_ = std::move(matrices_);
  }
}

void IndexBuilder::PublishNames() {
  for (size_t i = index_->names_.size(); i < names_.size(); ++i)
    index_->names_.push_back(names_[i]);
}

void IndexBuilder::CloseOpen(RawLoc& l) {
  if (l.in_mpi)
    MpiLeave(l, l.last);
  while (!l.stack.empty()) {
    AddSlice(l, l.stack.back().enter, l.last, l.stack.back().name, l.stack.size() - 1,
             SliceKind::kRegion);
    l.stack.pop_back();
  }
}

void IndexBuilder::PublishLocation(uint32_t id, RawLoc& l, bool final) {
  l.touched = false;
  const format::LocationDef* def = session_.Location(id);
  if (def && def->type == format::LocationType::kProcess) {
    l.samples.clear();  // not a row: its spans and slices are not kept
    l.calls.clear();
    l.slices.clear();
    l.calls_sorted = l.samples_seen = 0;
    return;
  }
  // Regions and a call still open at the end of the trace end with it.
  if (final)
    CloseOpen(l);
  bool added = false;
  IndexedLocation& out = FindOrInsert(
      index_->locations_, id, [](const IndexedLocation& x) { return x.id; }, &added);
  if (added) {
    out.id = id;
    out.cpu = session_.IsCpu(id);
    out.host = Host(session_.reader().PartHost(session_.FileOf(id)));
  }
  out.first = l.first;
  out.last = l.last;
  out.comm_first = l.comm_first;
  out.comm_last = l.comm_last;
  // The earliest time the records gained since the last Publish change the states from.
  uint64_t dirty = l.provisional_from;
  if (l.calls_sorted < l.calls.size()) {
    const auto mid = l.calls.begin() + static_cast<ptrdiff_t>(l.calls_sorted);
    std::sort(mid, l.calls.end(), SpanBefore);
    dirty = std::min(dirty, mid->begin);
    std::inplace_merge(l.calls.begin(), mid, l.calls.end(), SpanBefore);
    l.calls_sorted = l.calls.size();
  }
  for (size_t i = l.samples_seen; i < l.samples.size(); ++i)
    dirty = std::min(dirty, l.samples[i].begin);
  if (l.samples_seen == 0 && !l.samples.empty())
    dirty = 0;  // its first sample: its states are the sampler's from now on, all of them
  l.samples_seen = l.samples.size();
  if (!out.cpu && dirty != UINT64_MAX)
    Pieces(out, l, out.states.TruncateTo(dirty), final);
  if (added && l.slices.size() > 0 && final) {
    out.slices.AddAll(l.slices);  // after the run: one sort, as the index did before growing
    out.slices.Finish();
  } else if (!l.slices.empty()) {
    out.slices.Merge(l.slices);
  }
  l.slices.clear();
  if (final)
    l = RawLoc{};  // frees the raw records as soon as they are indexed
}

// The state pieces of a location (trace_index.h): inside its MPI calls and blocking waits the
// call's state; elsewhere the sampler's split of its span, or running (inferred) without sampler
// data. From the boundary `from` on; pieces before it are clipped away by AddPiece.
void IndexBuilder::Pieces(IndexedLocation& out, RawLoc& l, uint64_t from, bool final) {
  const bool sampled = !l.samples.empty();
  if (from == 0 && final)  // every piece at once: a sample cut by calls, and the calls
    out.states.Reserve(l.samples.size() + 2 * l.calls.size() + 2);
  // An MPI call still open (growing) holds its time until now: redone once it ends.
  Span open{0, 0, kCommWait};
  bool has_open = false;
  if (!final && l.in_mpi) {
    const std::string& fn = names_[DefName(l.mpi_func)];
    has_open = fn != "MPI_Init" && fn != "MPI_Init_thread" && fn != "MPI_Finalize";
    open = {l.mpi_enter, sampled ? UINT64_MAX : std::max(l.last, l.mpi_enter), kCommWait};
  }
  const std::vector<Span>& calls = l.calls;
  const size_t n = calls.size() + (has_open ? 1 : 0);
  auto call = [&](size_t i) -> const Span& { return i < calls.size() ? calls[i] : open; };
  // The first call that may end after `from` (calls do not overlap but for anomalies).
  size_t j = std::lower_bound(calls.begin(), calls.end(), from,
                              [](const Span& c, uint64_t t) { return c.begin < t; }) -
             calls.begin();
  while (j > 0 && calls[j - 1].end > from)
    --j;
  if (!sampled) {  // inferred: running outside the calls
    uint64_t t = j > 0 ? std::max(l.first, calls[j - 1].end) : l.first;
    for (; j < n; ++j) {
      const Span& c = call(j);
      if (c.begin > t)
        out.states.AddPiece(t, c.begin, OneState(kRunning), 1);
      out.states.AddPiece(std::max(t, c.begin), c.end, OneState(c.state), 1);
      t = std::max(t, c.end);
    }
    l.provisional_from = has_open ? open.begin : t;
    if (l.last > t)
      out.states.AddPiece(t, l.last, OneState(kRunning), 1);
    return;
  }
  l.provisional_from = has_open ? open.begin : UINT64_MAX;
  auto s = std::partition_point(l.samples.begin(), l.samples.end(),
                                [from](const Sample& x) { return x.end <= from; });
  for (; s != l.samples.end(); ++s) {
    uint64_t t = s->begin;
    while (j < n && call(j).end <= t)
      ++j;
    while (t < s->end) {
      if (j < n && call(j).begin <= t) {  // inside a call: its state
        const uint64_t e = std::min(s->end, call(j).end);
        out.states.AddPiece(t, e, OneState(call(j).state), 1);
        t = e;
        if (call(j).end <= t)
          ++j;
        continue;
      }
      const uint64_t e = j < n ? std::min(s->end, call(j).begin) : s->end;
      out.states.AddPiece(t, e, s->rate, s->total);
      t = e;
    }
  }
}

void IndexBuilder::PublishCpus() {
  for (auto& [cpu, runs] : cpu_runs_) {
    if (runs.empty())
      continue;
    bool added = false;
    CpuRow& row = FindOrInsert(
        index_->cpus_, cpu, [](const CpuRow& x) { return x.cpu; }, &added);
    row.cpu = cpu;
    std::sort(runs.begin(), runs.end(), SliceBefore);
    for (const Slice& s : runs)
      row.busy.AddPiece(s.begin, s.end, OneState(kRunning), 1);
    row.runs.Merge(runs);
    runs.clear();
  }
}

}  // namespace parmon::web
