// parmon view on a large generated trace (issue 15's targets): the time from starting
// `parmon view` to the first answered /api/timeline of the whole run (the coarse level of a
// large trace: docs/web.md) and to the complete index, the server's time per zoom and pan
// request on the complete index (p50, p95, max over a random walk of ranges from the whole run
// down to a few µs), and the server's peak memory (VmHWM) and bytes per event.
//
// The requests: the five the page makes for each zoom or pan (timeline, cpus, messages, matrix,
// graph), in turn, over random ranges.
//
// The trace: R ranks on a ring, each iterating every 10 µs through a user region, an MPI_Send to
// the next rank and an MPI_Recv from the previous one (8 events), a sampler record every 10 ms
// and a context switch pair every 100 µs.
//
// With --varied, each iteration's times, message sizes and tags are drawn from a hash: the trace
// takes a few bytes per event, as a recorded one does (bench/view_browser_bench.mjs: ~1 GB).
//
// usage: view_bench --parmon PATH [--events N] [--ranks R] [--queries Q] [--dir DIR] [--varied]
//                   [--slow-ms MS (print each request slower than MS)]
//        view_bench --write-only TRACE [--events N] [--ranks R] [--varied]   (the trace alone)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "format/codec.h"
#include "format/writer.h"

namespace {

using parmon::format::Event;
using parmon::format::Kind;
using parmon::format::Source;
using parmon::format::StreamEncoder;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kT0 = 1'000'000'000;
constexpr uint64_t kUs = 1000;

struct Gen {
  parmon::format::TraceWriter* w;
  std::map<std::pair<uint32_t, Source>, std::unique_ptr<StreamEncoder>> enc;
  void Ev(uint32_t loc,
          uint64_t ts,
          Kind k,
          std::initializer_list<uint64_t> args,
          Source src = Source::kRuntime,
          const std::string& payload = "") {
    auto& e = enc[{loc, src}];
    if (!e)
      e = std::make_unique<StreamEncoder>(loc, src);
    Event ev;
    ev.ts = ts;
    ev.location = loc;
    ev.kind = static_cast<uint16_t>(k);
    ev.source = src;
    ev.nargs = static_cast<uint8_t>(args.size());
    int i = 0;
    for (uint64_t a : args)
      ev.args[i++] = a;
    ev.payload = payload;
    e->Append(ev);
    if (e->count() >= 65536 && !w->Flush(e.get()).ok())
      std::exit(1);
  }
  void Def(Kind k, std::initializer_list<uint64_t> args, const std::string& payload) {
    Ev(0, kT0, k, args, Source::kDefinitions, payload);
  }
};

// One iteration's times (ns after its start) and message: the same every time, or with --varied
// drawn from a hash of (rank, iteration), so that a receiver knows its sender's message and the
// trace compresses about as a real one does (a few bytes per event instead of 0.3).
struct Step {
  uint64_t send, sent, received, left, bytes, tag;
};

Step Shape(uint32_t rank, uint64_t i, bool varied) {
  if (!varied)
    return {5 * kUs, 6 * kUs, 8 * kUs, 9 * kUs, 4096, 0};
  uint64_t h = (uint64_t{rank} << 40) ^ i;  // splitmix64
  h += 0x9e3779b97f4a7c15;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9;
  h = (h ^ (h >> 27)) * 0x94d049bb133111eb;
  h ^= h >> 31;
  const uint64_t send = 3 * kUs + h % (3 * kUs);              // 3-6 µs of work
  const uint64_t sent = send + 200 + (h >> 12) % 1000;        // a send of 0.2-1.2 µs
  const uint64_t received = 7 * kUs + (h >> 22) % (2 * kUs);  // 7-9 µs
  return {send,         sent, received, received + 100 + (h >> 34) % 400, 1 + (h >> 40) % 65536,
          (h >> 58) % 8};
}

uint64_t Generate(const std::string& path, uint64_t events, uint32_t ranks, bool varied) {
  auto w = parmon::format::TraceWriter::Create(path);
  if (!w.ok()) {
    std::fprintf(stderr, "view_bench: %s\n", w.status().message().c_str());
    std::exit(1);
  }
  Gen g{w->get(), {}};
  (*w)->WriteSession({{"command", "view_bench"}, {"start_ts", std::to_string(kT0)}}).ok();
  g.Def(Kind::kDefString, {1, 5}, "MPI_Send");
  g.Def(Kind::kDefString, {2, 5}, "MPI_Recv");
  g.Def(Kind::kDefString, {3, 1}, "work");
  for (uint32_t r = 0; r < ranks; ++r) {
    g.Def(Kind::kDefProcess, {1000 + r, 1}, "ring");
    g.Def(Kind::kDefLocation, {r + 1, 1, 1000 + r, 1000 + r}, "ring");
  }
  const uint64_t iterations = std::max<uint64_t>(1, events / (8 * ranks));
  for (uint32_t r = 0; r < ranks; ++r) {
    const uint32_t loc = r + 1;
    const uint32_t from = (r + ranks - 1) % ranks;
    g.Ev(loc, kT0, Kind::kMpiInit, {r, ranks, 0});
    for (uint64_t i = 0; i < iterations; ++i) {
      const uint64_t t = kT0 + kUs + i * 10 * kUs;
      const Step s = Shape(r, i, varied), p = Shape(from, i, varied);
      g.Ev(loc, t, Kind::kRegionEnter, {3});
      g.Ev(loc, t + s.send, Kind::kMpiEnter, {1});
      g.Ev(loc, t + s.send, Kind::kMpiSend, {(r + 1) % ranks, s.tag, 1, s.bytes, 0});
      g.Ev(loc, t + s.sent, Kind::kMpiLeave, {1});
      g.Ev(loc, t + s.sent, Kind::kMpiEnter, {2});
      g.Ev(loc, t + s.received, Kind::kMpiRecv, {from, p.tag, 1, p.bytes, 0, t + p.sent});
      g.Ev(loc, t + s.received, Kind::kMpiLeave, {2});
      g.Ev(loc, t + s.left, Kind::kRegionLeave, {3});
      if (i % 10 == 0) {
        g.Ev(loc, t, Kind::kSwitchIn, {r % 4}, Source::kSched);
        g.Ev(loc, t + 95 * kUs, Kind::kSwitchOut, {r % 4, i % 20 == 0}, Source::kSched);
      }
      if (i % 1000 == 999)
        g.Ev(loc, t + 10 * kUs, Kind::kThreadStates, {8000 * kUs, 2000 * kUs, 0, 0, 0, 0, 0, 0},
             Source::kSampler);
    }
  }
  for (auto& [key, e] : g.enc)
    if (e->count())
      (*w)->Flush(e.get()).ok();
  const uint64_t end = kT0 + kUs + iterations * 10 * kUs;
  (*w)->Finish({{"end_ts", std::to_string(end)}}).ok();
  return iterations * 8 * ranks;
}

// GET http://127.0.0.1:port/target: the whole answer (headers and body), *status its code.
std::string Get(int port, const std::string& target, int* status) {
  boost::asio::ip::tcp::iostream s("127.0.0.1", std::to_string(port));
  s << "GET " << target << " HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n" << std::flush;
  std::string in((std::istreambuf_iterator<char>(s)), std::istreambuf_iterator<char>());
  *status = in.size() > 12 ? std::atoi(in.c_str() + 9) : 0;
  return in;
}

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string parmon, dir = "/tmp", write_only;
  uint64_t events = 100'000'000, queries = 300;
  uint32_t ranks = 16;
  bool varied = false;
  double slow_ms = 0;  // print each request slower than this
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--varied") {
      varied = true;
      continue;
    }
    if (i + 1 >= argc)
      break;
    std::string v = argv[++i];
    if (k == "--parmon")
      parmon = v;
    else if (k == "--events")
      events = std::stoull(v);
    else if (k == "--ranks")
      ranks = static_cast<uint32_t>(std::stoul(v));
    else if (k == "--queries")
      queries = std::stoull(v);
    else if (k == "--slow-ms")
      slow_ms = std::stod(v);
    else if (k == "--dir")
      dir = v;
    else if (k == "--write-only")
      write_only = v;
  }
  if (!write_only.empty() && ranks >= 2) {  // the trace alone (tests, profiling)
    std::printf("%llu events\n",
                static_cast<unsigned long long>(Generate(write_only, events, ranks, varied)));
    return 0;
  }
  if (parmon.empty() || ranks < 2) {
    std::fprintf(
        stderr,
        "usage: view_bench --parmon PATH [--events N] [--ranks R] [--queries Q] [--dir DIR] "
        "[--varied] [--slow-ms MS]\n"
        "       view_bench --write-only TRACE [--events N] [--ranks R] [--varied]\n");
    return 2;
  }
  const std::string path = dir + "/view_bench_" + std::to_string(getpid()) + ".ptrace";
  auto g0 = Clock::now();
  const uint64_t written = Generate(path, events, ranks, varied);
  std::ifstream f(path, std::ios::ate | std::ios::binary);
  std::printf("trace: %llu events, %d ranks, %.1f MB, generated in %.1f s\n",
              static_cast<unsigned long long>(written), ranks, f.tellg() / 1e6,
              Ms(Clock::now() - g0) / 1e3);
  int out[2];
  if (pipe(out) != 0)
    return 1;
  const auto start = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    execl(parmon.c_str(), parmon.c_str(), "view", path.c_str(), "--port", "0", nullptr);
    _exit(127);
  }
  close(out[1]);
  std::string line;
  char c;
  while (read(out[0], &c, 1) == 1 && c != '\n')
    line += c;
  const size_t colon = line.rfind(':');
  const int port = colon == std::string::npos ? 0 : std::atoi(line.c_str() + colon + 1);
  int status = 0;
  std::string session = Get(port, "/api/session", &status);
  const auto end_at = session.find("\"end\":");
  const uint64_t end = end_at == std::string::npos ? 0 : std::stoull(session.substr(end_at + 6));
  const std::string whole = "/api/timeline?t0=0&t1=" + std::to_string(end) + "&px=1500";
  const std::string first = Get(port, whole, &status);
  const double first_ms = Ms(Clock::now() - start);
  const bool coarse = first.find("\"complete\":false") != std::string::npos;
  std::printf(
      "parmon view: first whole-run /api/timeline (status %d, %s) answered %.0f ms after "
      "start\n",
      status, coarse ? "coarse: sampler level" : "complete", first_ms);
  // The complete index: /api/session without "live" (docs/web.md).
  while (session.find("\"live\"") != std::string::npos && status == 200) {
    usleep(50'000);
    session = Get(port, "/api/session", &status);
  }
  std::printf("parmon view: complete index served %.0f ms after start\n", Ms(Clock::now() - start));
  std::mt19937_64 rng(42);
  // The five requests the page makes for each zoom or pan (web/ui/main.ts), in turn.
  const char* const what[] = {"timeline", "cpus", "messages", "matrix", "graph"};
  constexpr int kKinds = 5;
  std::vector<double> lat, by_kind[kKinds];
  uint64_t bytes = 0;
  for (uint64_t q = 0; q < queries; ++q) {
    const uint64_t span = std::max<uint64_t>(10'000, end >> (rng() % 22));
    const uint64_t t0 = end > span ? rng() % (end - span) : 0;
    const int kind = static_cast<int>(q % kKinds);
    const char* extra[] = {"&px=1500", "&px=1500", "&limit=2000", "", "&steps=20"};
    std::string target = std::string("/api/") + what[kind] + "?t0=" + std::to_string(t0) +
                         "&t1=" + std::to_string(t0 + span) + extra[kind];
    const auto t = Clock::now();
    bytes += Get(port, target, &status).size();
    lat.push_back(Ms(Clock::now() - t));
    by_kind[kind].push_back(lat.back());
    if (status != 200)
      std::printf("status %d for %s\n", status, target.c_str());
    if (slow_ms > 0 && lat.back() > slow_ms)
      std::printf("  slow: %.1f ms for %s\n", lat.back(), target.c_str());
  }
  std::sort(lat.begin(), lat.end());
  for (int k = 0; k < kKinds; ++k) {
    std::sort(by_kind[k].begin(), by_kind[k].end());
    if (!by_kind[k].empty())
      std::printf("  %-9s p50 %.1f ms, p95 %.1f ms, max %.1f ms\n", what[k],
                  by_kind[k][by_kind[k].size() / 2], by_kind[k][by_kind[k].size() * 95 / 100],
                  by_kind[k].back());
  }
  std::string hwm;
  std::ifstream st("/proc/" + std::to_string(pid) + "/status");
  for (std::string l; std::getline(st, l);)
    if (l.rfind("VmHWM", 0) == 0)
      hwm = l;
  const double hwm_kb = hwm.size() > 6 ? std::atof(hwm.c_str() + 6) : 0;
  std::printf(
      "requests: %llu, p50 %.1f ms, p95 %.1f ms, max %.1f ms, %.0f KB per answer; server %s "
      "(%.1f bytes per event)\n",
      static_cast<unsigned long long>(queries), lat[lat.size() / 2], lat[lat.size() * 95 / 100],
      lat.back(), bytes / 1e3 / static_cast<double>(queries), hwm.c_str(),
      hwm_kb * 1024 / static_cast<double>(written));
  kill(pid, SIGTERM);
  int ws = 0;
  waitpid(pid, &ws, 0);
  unlink(path.c_str());
  return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : 1;
}
