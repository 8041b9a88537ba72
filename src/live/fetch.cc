#include "live/fetch.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "live/client.h"
#include "live/protocol.h"

namespace parmon::live {
namespace {

constexpr size_t kMaxFetchRanks = 1u << 19;
constexpr size_t kMaxFollowRanks = 4096;
constexpr size_t kFetchWorkers = 16;

struct One {
  uint64_t bytes = 0;
  bool complete = false;
  Status status;
  std::vector<int> ranks;  // the session is per rank: these
  size_t world = 0;        // ... of a world of this many ranks (0: unknown)
  std::string lost;        // the collector marked the stream lost: its sentence
};

// Copies one stream (rank -1: a single-process session) into path.
One FetchStream(const Endpoint& ep,
                const std::string& token,
                const std::string& session,
                int rank,
                const std::string& path,
                bool follow,
                const std::atomic<bool>* stop) {
  One r;
  auto ch = Channel::Open(ep, token);
  if (!ch.ok()) {
    r.status = ch.status();
    return r;
  }
  nlohmann::json sub = {{"session", session}, {"offset", 0}, {"follow", follow}};
  if (rank >= 0)
    sub["rank"] = rank;
  if (r.status = (*ch)->Write(FrameType::kSubscribe, sub.dump()); !r.status.ok())
    return r;
  int fd = -1;
  bool ended = false;  // the stream had ended when the collector welcomed us
  while (true) {
    auto f = (*ch)->Read(0.25);
    if (!f.ok()) {
      if ((*ch)->timed_out() && !(stop && stop->load()))
        continue;
      if (!(stop && stop->load()))
        r.status = f.status();
      break;
    }
    if (f->type == FrameType::kWelcome) {
      auto j = nlohmann::json::parse(f->payload, nullptr, false);
      if (j.is_object() && j.contains("ranks") && j["ranks"].is_array()) {
        for (auto& k : j["ranks"])
          if (k.is_number_integer())
            r.ranks.push_back(k.get<int>());
        r.world = std::min<uint64_t>(JsonU64(j, "world", 0), kMaxFetchRanks);
        return r;
      }
      if (path.empty()) {  // only the list of ranks was asked for
        r.status = Status::Error(fmt::format("{} is no longer a per-rank session", session));
        return r;
      }
      ended = JsonBool(j, "ended", false);
      fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) {
        r.status = Status::Error(fmt::format("cannot create {}: {}", path, strerror(errno)));
        return r;
      }
    } else if (f->type == FrameType::kData && fd >= 0) {
      uint64_t offset = 0;
      std::string_view bytes;
      if (r.status = DecodeData(f->payload, &offset, &bytes); !r.status.ok())
        break;
      if (offset != r.bytes) {
        r.status =
            Status::Error(fmt::format("the collector sent byte {} after {}", offset, r.bytes));
        break;
      }
      if (write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
        r.status = Status::Error(fmt::format("cannot write {}: {}", path, strerror(errno)));
        break;
      }
      r.bytes += bytes.size();
    } else if (f->type == FrameType::kBye) {
      std::string error = PeerError(*f);
      if (!error.empty())
        r.status = Status::Error(error);
      auto j = nlohmann::json::parse(f->payload, nullptr, false);
      r.lost = JsonString(j.is_object() ? j : nlohmann::json::object(), "lost", "");
      r.complete = error.empty() && r.lost.empty() && (follow || ended);
      break;
    }
  }
  if (fd >= 0)
    close(fd);
  return r;
}

// Follows every rank of a per-rank session at once, a thread each, into out_path/rank-K.ptrace:
// the ranks listed, then those that reach the collector later (asked for every 250 ms) until the
// world is there. Ends when every rank followed has ended and the world is complete, or one is
// lost (then ranks that never came are not waited for), or on *stop, or at the first failure.
Status FollowRanks(const Endpoint& ep,
                   const std::string& token,
                   const std::string& session,
                   const std::string& out_path,
                   const One& listed,
                   const std::atomic<bool>* stop,
                   FetchResult* result) {
  struct Part {
    int rank = -1;
    One one;
    std::atomic<bool> finished{false};
  };
  std::deque<Part> parts;  // stable addresses: each thread writes its own
  std::vector<std::thread> threads;
  std::set<int> known;
  std::atomic<bool> halt{false};
  size_t world = listed.world;
  auto add = [&](const std::vector<int>& ranks) {
    for (int k : ranks) {
      if (k < 0 || known.size() >= kMaxFollowRanks || !known.insert(k).second)
        continue;
      Part* p = &parts.emplace_back();
      p->rank = k;
      threads.emplace_back([&ep, &token, &session, &out_path, &halt, p] {
        p->one = FetchStream(ep, token, session, p->rank,
                             fmt::format("{}/rank-{}.ptrace", out_path, p->rank), true, &halt);
        p->finished = true;
      });
    }
  };
  add(listed.ranks);
  Status failed;
  for (;;) {
    size_t finished = 0;
    bool lost = false;
    for (const Part& p : parts) {
      if (!p.finished)
        continue;
      ++finished;
      lost |= !p.one.lost.empty();
      if (!p.one.status.ok() && failed.ok())
        failed = p.one.status;
    }
    if (!failed.ok() || (stop && stop->load()))
      break;
    if (finished == parts.size() && (world == 0 || known.size() >= world || lost))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    if (world == 0 || known.size() < world) {  // ranks that reached the collector since
      One again = FetchStream(ep, token, session, -1, "", false, stop);
      if (again.status.ok()) {
        world = std::max(world, again.world);
        add(again.ranks);
      }
    }
  }
  halt = true;  // the threads still following (a stop, or a failure)
  for (auto& t : threads)
    t.join();
  if (!failed.ok())
    return failed;
  result->complete = world == 0 || known.size() >= world;
  for (const Part& p : parts) {
    result->bytes += p.one.bytes;
    result->complete = result->complete && p.one.complete;
    if (!p.one.lost.empty() && result->lost.empty())
      result->lost = fmt::format("rank {}: {}", p.rank, p.one.lost);
  }
  if (!result->lost.empty() && world > known.size())
    result->lost += fmt::format("; {} of the {} ranks never reached the collector",
                                world - known.size(), world);
  return Status::Ok();
}

}  // namespace

StatusOr<FetchResult> FetchSession(const std::string& host_port,
                                   const std::string& session,
                                   const std::string& out_path,
                                   bool follow,
                                   const std::atomic<bool>* stop,
                                   const std::string& token_file) {
  PARMON_ASSIGN_OR_RETURN(Endpoint ep, ParseEndpoint(host_port));
  PARMON_ASSIGN_OR_RETURN(std::string token, ReadToken(token_file));
  FetchResult result;
  result.path = out_path;
  One single = FetchStream(ep, token, session, -1, out_path, follow, stop);
  if (!single.status.ok())
    return single.status;
  if (single.ranks.empty()) {
    result.bytes = single.bytes;
    result.complete = single.complete;
    result.lost = single.lost;
    return result;
  }
  // A per-rank session: a directory of rank files. The list comes from the collector, so it is
  // checked before it sizes anything: distinct ranks >= 0, at most kMaxFetchRanks (the most
  // ranks a job's string ids can tell apart). Following needs every rank's stream open at
  // once (a thread each, bounded by kMaxFollowRanks); a one-off copy uses a pool.
  std::vector<int> sorted = single.ranks;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front() < 0 || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return Status::Error(
        fmt::format("the collector's list of the ranks of {} is not valid (negative or repeated "
                    "ranks)",
                    session));
  if (sorted.size() > kMaxFetchRanks)
    return Status::Error(
        fmt::format("the collector lists {} ranks for {}, more than the {} a "
                    "session can have",
                    sorted.size(), session, kMaxFetchRanks));
  if (follow && sorted.size() > kMaxFollowRanks)
    return Status::Error(
        fmt::format("{} has {} ranks: following more than {} ranks at once is "
                    "not supported; copy it without --follow",
                    session, sorted.size(), kMaxFollowRanks));
  result.per_rank = true;
  std::error_code ec;
  if (std::filesystem::is_regular_file(out_path, ec))
    std::filesystem::remove(out_path, ec);
  std::filesystem::create_directories(out_path, ec);
  if (ec)
    return Status::Error(fmt::format("cannot create the directory {}: {}", out_path, ec.message()));
  if (follow) {
    PARMON_RETURN_IF_ERROR(FollowRanks(ep, token, session, out_path, single, stop, &result));
    return result;
  }
  std::vector<One> parts(single.ranks.size());
  std::atomic<size_t> next{0};
  const size_t workers = std::min<size_t>(parts.size(), kFetchWorkers);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < parts.size();) {
        int k = single.ranks[i];
        parts[i] = FetchStream(ep, token, session, k, fmt::format("{}/rank-{}.ptrace", out_path, k),
                               follow, stop);
      }
    });
  for (auto& t : threads)
    t.join();
  result.complete = true;
  for (const One& p : parts) {
    if (!p.status.ok())
      return p.status;
    result.bytes += p.bytes;
    result.complete = result.complete && p.complete;
    if (!p.lost.empty() && result.lost.empty())
      result.lost = p.lost;
  }
  return result;
}

StatusOr<std::shared_ptr<BackgroundFetch>> BackgroundFetch::Start(const std::string& source,
                                                                  const std::string& out_path,
                                                                  bool remove_at_end,
                                                                  const std::string& token_file) {
  PARMON_ASSIGN_OR_RETURN(Endpoint ep, ParseEndpoint(source));
  if (ep.session.empty())
    return Status::Error(fmt::format("'{}' is not HOST:PORT/SESSION", source));
  std::shared_ptr<BackgroundFetch> f(new BackgroundFetch());
  f->path_ = out_path;
  f->remove_at_end_ = remove_at_end;
  BackgroundFetch* p = f.get();
  std::string host_port = fmt::format("{}:{}", ep.host, ep.port);
  p->thread_ = std::thread([p, host_port, session = ep.session, token_file] {
    // A follower may start before the recorder: a session not there yet is asked for again
    // for up to a minute.
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    auto r = FetchSession(host_port, session, p->path_, true, &p->stop_, token_file);
    while (!r.ok() && r.status().message().rfind("no session ", 0) == 0 && !p->stop_ &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      r = FetchSession(host_port, session, p->path_, true, &p->stop_, token_file);
    }
    {
      std::lock_guard<std::mutex> lock(p->mu_);
      p->status_ = r.ok() ? Status::Ok() : r.status();
      p->complete_ = r.ok() && r->complete;
      p->lost_ = r.ok() ? r->lost : std::string();
    }
    p->done_ = true;
  });
  return f;
}

BackgroundFetch::~BackgroundFetch() {
  stop_ = true;
  if (thread_.joinable())
    thread_.join();
  if (remove_at_end_) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
}

Status BackgroundFetch::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

bool BackgroundFetch::complete() const {
  std::lock_guard<std::mutex> lock(mu_);
  return complete_;
}

std::string BackgroundFetch::lost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_;
}

bool IsRemoteSession(const std::string& name) {
  std::error_code ec;
  if (std::filesystem::exists(name, ec))
    return false;
  auto ep = ParseEndpoint(name);
  return ep.ok() && !ep->session.empty() && name.find(':') != std::string::npos;
}

}  // namespace parmon::live
