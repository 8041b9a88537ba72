#include "live/fetch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "live/client.h"
#include "live/protocol.h"

namespace parmon::live {
namespace {

struct One {
  uint64_t bytes = 0;
  bool complete = false;
  Status status;
  std::vector<int> ranks;  // the session is per rank: these
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
        return r;
      }
      ended = j.is_object() && j.value("ended", false);
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
      r.complete = error.empty() && (follow || ended);
      break;
    }
  }
  if (fd >= 0)
    close(fd);
  return r;
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
    return result;
  }
  // A per-rank session: a directory of rank files, each fetched on its own thread.
  result.per_rank = true;
  std::error_code ec;
  if (std::filesystem::is_regular_file(out_path, ec))
    std::filesystem::remove(out_path, ec);
  std::filesystem::create_directories(out_path, ec);
  if (ec)
    return Status::Error(fmt::format("cannot create the directory {}: {}", out_path, ec.message()));
  std::vector<One> parts(single.ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < single.ranks.size(); ++i)
    threads.emplace_back([&, i] {
      int k = single.ranks[i];
      parts[i] = FetchStream(ep, token, session, k, fmt::format("{}/rank-{}.ptrace", out_path, k),
                             follow, stop);
    });
  for (auto& t : threads)
    t.join();
  result.complete = true;
  for (const One& p : parts) {
    if (!p.status.ok())
      return p.status;
    result.bytes += p.bytes;
    result.complete = result.complete && p.complete;
  }
  return result;
}

}  // namespace parmon::live
