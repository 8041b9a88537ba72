#include "model/session.h"

#include <algorithm>

#include <fmt/format.h>

namespace parmon::model {

StatusOr<std::unique_ptr<Session>> Session::Open(const std::string& path, SessionOptions options) {
  auto reader = format::TraceReader::Open(path, options.open);
  if (!reader.ok())
    return reader.status();
  return FromReader(std::move(*reader), options);
}

StatusOr<std::unique_ptr<Session>> Session::Open(const std::vector<std::string>& paths,
                                                 SessionOptions options) {
  auto reader = format::TraceReader::Open(paths, options.open);
  if (!reader.ok())
    return reader.status();
  return FromReader(std::move(*reader), options);
}

StatusOr<std::unique_ptr<Session>> Session::FromReader(std::unique_ptr<format::TraceReader> reader,
                                                       SessionOptions options) {
  auto s = std::unique_ptr<Session>(new Session());
  s->owned_ = std::move(reader);
  s->reader_ = s->owned_.get();
  PARMON_RETURN_IF_ERROR(s->Init(options));
  return s;
}

StatusOr<std::unique_ptr<Session>> Session::Over(const format::TraceReader& reader,
                                                 SessionOptions options) {
  auto s = std::unique_ptr<Session>(new Session());
  s->reader_ = &reader;
  PARMON_RETURN_IF_ERROR(s->Init(options));
  return s;
}

Status Session::Init(const SessionOptions& options) {
  // Decoded once by the reader; a bad value is absent there and named in warnings().
  metadata_ = reader_->metadata();
  follow_clocks_ = options.follow_clocks && options.align_clocks && reader_->parts().size() > 1;
  if (follow_clocks_) {
    live_clocks_.resize(reader_->parts().size());
    read_until_.assign(reader_->parts().size(), 0);
    FollowClocks();
  } else if (options.align_clocks && reader_->parts().size() > 1) {
    // One pass finds the ranks and the ping-pongs alike.
    MpiScan scan = ScanMpi(*reader_);
    clocks_ = AlignClocks(scan.file_rank, scan.syncs);
    rank_by_file_pid_ = std::move(scan.rank_by_file_pid);
  }
  const auto& streams = reader_->streams();
  stream_clock_.resize(streams.size(), nullptr);
  for (size_t i = 0; i < streams.size(); ++i) {
    if (streams[i].chunks.empty())
      continue;
    const uint32_t file = streams[i].chunks.front().file;
    stream_clock_[i] = follow_clocks_ ? &live_clocks_[file] : clocks_.ForFile(file);
    file_of_location_.emplace(streams[i].location, file);
  }
  ComputeWindow();
  return Status::Ok();
}

void Session::Refresh() {
  metadata_ = reader_->metadata();
  const auto& streams = reader_->streams();
  for (size_t i = stream_clock_.size(); i < streams.size(); ++i) {
    const uint32_t file = streams[i].chunks.empty() ? 0 : streams[i].chunks.front().file;
    stream_clock_.push_back(follow_clocks_ ? &live_clocks_[file] : clocks_.ForFile(file));
    file_of_location_.emplace(streams[i].location, file);
  }
  if (follow_clocks_)
    FollowClocks();
  else if (clocks_.empty())
    rank_by_file_pid_.reset();  // new MpiInit events may have come
  ComputeWindow();
}

void Session::FollowClocks() {
  scanner_.Scan(*reader_);
  const MpiScan& scan = scanner_.result();
  clocks_ = AlignClocks(scan.file_rank, scan.syncs);
  rank_by_file_pid_ = scan.rank_by_file_pid;
  for (uint32_t f = 0; f < live_clocks_.size(); ++f) {
    ClockMap next;
    if (const ClockMap* m = clocks_.ForFile(f))
      next = *m;
    // Events of this file read so far (up to read_until_; none at the open) were aligned with
    // the old map.
    if (read_until_[f] > 0 && !SameOffsets(live_clocks_[f], next, read_until_[f]))
      realigned_ = true;
    live_clocks_[f].samples = std::move(next.samples);
  }
  for (const format::Stream& st : reader_->streams())
    if (!st.chunks.empty())
      read_until_[st.chunks.front().file] =
          std::max(read_until_[st.chunks.front().file], st.last_ts);
}

uint64_t Session::complete_until() const {
  const format::TraceReader& r = *reader_;
  if (r.parts().size() < 2 || clocks_.empty())
    return r.complete_until();
  uint64_t out = UINT64_MAX;
  for (uint32_t f = 0; f < r.parts().size(); ++f) {
    const uint64_t until = r.PartCompleteUntil(f);
    if (until == UINT64_MAX)
      continue;
    size_t hint = 0;
    const ClockMap* c = follow_clocks_ ? &live_clocks_[f] : clocks_.ForFile(f);
    out = std::min(out, c ? c->Apply(until, &hint) : until);
  }
  return out;
}

void Session::ComputeWindow() {
  const format::TraceReader& r = *reader_;
  start_ = metadata_.session.start_ts;
  // first_ts() is 0 while no event chunk has been read (a growing file whose first watermark came
  // before its first events): the recorder's start stands until then (a live analysis begun then
  // kept a window from 0, every snapshot's duration the machine's uptime).
  if (start_ == 0 || (r.first_ts() != 0 && start_ > r.first_ts()))
    start_ = r.first_ts();
  end_ = std::max(metadata_.end.end_ts, r.last_ts());
  if (!clocks_.empty()) {
    // Recorders' start and end times are on their own clocks: the session is the span of its
    // events on rank 0's.
    start_ = UINT64_MAX;
    end_ = 0;
    for (StreamIndex i = 0; i < r.streams().size(); ++i) {
      const format::Stream& st = r.streams()[i];
      if (st.source == format::Source::kDefinitions || st.events == 0)
        continue;
      start_ = std::min(start_, first_ts(i));
      end_ = std::max(end_, last_ts(i));
    }
    if (start_ == UINT64_MAX)
      start_ = 0;
  }
  if (end_ < start_)
    end_ = start_;
}

const ClockMap* Session::ClockOf(StreamIndex s) const {
  return s < stream_clock_.size() ? stream_clock_[s] : nullptr;
}

uint64_t Session::Aligned(StreamIndex s, uint64_t t) const {
  size_t hint = 0;
  const ClockMap* c = ClockOf(s);
  return c ? c->Apply(t, &hint) : t;
}

const format::LocationDef* Session::Location(uint32_t id) const {
  const auto& locations = reader_->definitions().locations;
  auto it = locations.find(id);
  return it == locations.end() ? nullptr : &it->second;
}

uint32_t Session::PidOf(uint32_t id) const {
  const format::LocationDef* l = Location(id);
  return l ? l->pid : 0;
}

uint32_t Session::TidOf(uint32_t id) const {
  const format::LocationDef* l = Location(id);
  return l ? l->tid : 0;
}

std::string_view Session::NameOf(uint32_t id) const {
  const format::LocationDef* l = Location(id);
  return l ? std::string_view(l->name) : std::string_view();
}

bool Session::IsCpu(uint32_t id) const {
  const format::LocationDef* l = Location(id);
  return l && l->type == format::LocationType::kCpu;
}

uint32_t Session::FileOf(uint32_t id) const {
  auto it = file_of_location_.find(id);
  return it == file_of_location_.end() ? 0 : it->second;
}

void Session::EnsureRanks() const {
  if (!rank_by_file_pid_)
    rank_by_file_pid_ = ScanMpi(*reader_).rank_by_file_pid;
}

int64_t Session::RankOf(uint32_t id) const {
  const format::LocationDef* l = Location(id);
  if (!l || l->type == format::LocationType::kCpu)
    return -1;
  EnsureRanks();
  auto it = rank_by_file_pid_->find({FileOf(id), l->pid});
  return it == rank_by_file_pid_->end() ? -1 : it->second;
}

}  // namespace parmon::model
