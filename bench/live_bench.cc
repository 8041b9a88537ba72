// live_bench: streaming through `parmon record --to` over loopback (issue 14).
//
// Starts `parmon serve` on 127.0.0.1 (port 0), then for each target rate runs live_emitter (a
// program emitting region enter/leave events at that sustained rate) under `parmon record -o
// LOCAL --to`, while a consumer subscribed to the session at the collector receives the stream.
// For every EVENTS chunk the consumer notes when it arrived; an event's latency is its arrival
// less its commit time (its timestamp, mapped to wall-clock time with the SESSION chunk's
// start_ts and start_realtime_ns). Events of one chunk get times spread evenly between the
// chunk's first and last timestamps (the chunk header holds both; decoding every event would
// cost the consumer more than the measurement is worth). A rate is sustained with zero loss when
// the program kept its pace (>= 95% of the target), the END chunk counts no lost event, and the
// stored session is byte-identical to the local copy. Prints the machine and load first, and the
// collector's RSS after each session.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_spawn.h"
#include "format/chunk.h"
#include "format/codec.h"
#include "live/client.h"

namespace {

using parmon::bench::Slurp;
using parmon::bench::Spawn;

int64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

using namespace parmon;

// Resident set in KiB, from /proc/PID/statm (pages).
long RssKib(pid_t pid) {
  long size = 0, resident = 0;
  std::ifstream("/proc/" + std::to_string(pid) + "/statm") >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

struct Arrival {
  int64_t at_ns;  // realtime
  uint64_t first_ts, last_ts;
  uint32_t count;
};

struct Consumed {
  std::vector<Arrival> arrivals;
  int64_t start_realtime = 0;
  uint64_t start_ts = 0, lost = 0, end_events = 0;
  bool ended = false;
  std::string error;
};

std::map<std::string, std::string> KeyValues(const format::ChunkHeader& h, const uint8_t* p) {
  std::string raw;
  if (h.codec == static_cast<uint16_t>(format::Codec::kZstd)) {
    raw.resize(h.raw_size);
    ZSTD_decompress(raw.data(), raw.size(), p, h.stored_size);
  } else {
    raw.assign(reinterpret_cast<const char*>(p), h.stored_size);
  }
  std::vector<std::pair<std::string, std::string>> kv;
  format::DecodeKeyValues(reinterpret_cast<const uint8_t*>(raw.data()), raw.size(), &kv);
  return {kv.begin(), kv.end()};
}

// Subscribes to the session (retrying until the recorder has created it) and notes every
// chunk's arrival until the session ends.
void Consume(const std::string& addr, const std::string& session, Consumed* c) {
  auto ep = live::ParseEndpoint(addr);
  std::unique_ptr<live::Channel> ch;
  for (int attempt = 0; attempt < 600 && !ch; ++attempt) {
    auto open = live::Channel::Open(*ep, "");
    if (!open.ok())
      break;
    nlohmann::json sub = {{"session", session}, {"offset", 0}, {"follow", true}};
    (void)(*open)->Write(live::FrameType::kSubscribe, sub.dump());
    auto f = (*open)->Read(10);
    if (f.ok() && f->type == live::FrameType::kWelcome)
      ch = std::move(*open);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!ch) {
    c->error = "could not subscribe";
    return;
  }
  std::string buf;
  size_t pos = sizeof(format::FileHeader);
  while (true) {
    auto f = ch->Read(120);
    if (!f.ok() || f->type == live::FrameType::kBye)
      break;
    if (f->type != live::FrameType::kData)
      continue;
    int64_t now = RealtimeNs();
    buf.append(f->payload, 8, std::string::npos);
    format::ChunkHeader h;
    while (buf.size() >= pos + sizeof h) {
      memcpy(&h, buf.data() + pos, sizeof h);
      if (buf.size() < pos + sizeof h + h.stored_size)
        break;
      const auto* payload = reinterpret_cast<const uint8_t*>(buf.data() + pos + sizeof h);
      if (h.type == static_cast<uint16_t>(format::ChunkType::kSession)) {
        auto kv = KeyValues(h, payload);
        c->start_realtime = atoll(kv["start_realtime_ns"].c_str());
        c->start_ts = strtoull(kv["start_ts"].c_str(), nullptr, 10);
      } else if (h.type == static_cast<uint16_t>(format::ChunkType::kEvents) && h.source == 1) {
        c->arrivals.push_back({now, h.first_ts, h.last_ts, h.event_count});
      } else if (h.type == static_cast<uint16_t>(format::ChunkType::kEnd)) {
        auto kv = KeyValues(h, payload);
        c->lost = strtoull(kv["lost_events"].c_str(), nullptr, 10);
        c->end_events = strtoull(kv["events"].c_str(), nullptr, 10);
        c->ended = true;
      }
      pos += sizeof h + h.stored_size;
    }
    buf.erase(0, pos);  // keep memory to one chunk
    pos = 0;
  }
}

// p-th percentile (0-1) of event latencies in ms, events spread evenly in their chunk.
std::pair<double, double> Percentiles(const Consumed& c) {
  std::vector<double> lat;
  for (const Arrival& a : c.arrivals) {
    uint32_t samples = std::min<uint32_t>(a.count, 64);  // enough to weigh each chunk
    for (uint32_t i = 0; i < samples; ++i) {
      double ts =
          a.first_ts + (a.last_ts - a.first_ts) * (samples > 1 ? double(i) / (samples - 1) : 1);
      double commit = c.start_realtime + (ts - double(c.start_ts));
      for (uint32_t w = 0; w < a.count / samples; ++w)
        lat.push_back((a.at_ns - commit) / 1e6);
    }
  }
  if (lat.empty())
    return {0, 0};
  std::sort(lat.begin(), lat.end());
  return {lat[lat.size() / 2], lat[std::min(lat.size() - 1, lat.size() * 99 / 100)]};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<double> rates = {1e6, 3e6, 10e6, 20e6, 30e6};
  double seconds = 3;
  int threads = 2;
  std::string flush = "100ms";  // the recorder's --flush: how long drained events may wait
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc)
      seconds = atof(argv[++i]);
    else if (a == "--flush" && i + 1 < argc)
      flush = argv[++i];
    else if (a == "--threads" && i + 1 < argc)
      threads = atoi(argv[++i]);
    else if (a == "--rates" && i + 1 < argc) {
      rates.clear();
      std::stringstream ss(argv[++i]);
      std::string r;
      while (std::getline(ss, r, ','))
        rates.push_back(atof(r.c_str()) * 1e6);
    } else if (a.rfind("--benchmark", 0) == 0) {
      // scripts/bench.sh passes Google Benchmark's options to every *_bench: not ours.
    } else {
      fprintf(stderr,
              "usage: live_bench [--rates M,M,...(millions/s)] [--seconds S] [--threads N] "
              "[--flush DUR]\n");
      return 2;
    }
  }
  std::string bin = PARMON_BENCH_BIN_DIR;
  utsname u;
  uname(&u);
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  printf("machine: %s %s, %u CPUs, load %.2f %.2f %.2f\n", u.nodename, u.release,
         std::thread::hardware_concurrency(), load[0], load[1], load[2]);
  std::string dir =
      std::filesystem::temp_directory_path() / ("live_bench." + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  pid_t serve =
      Spawn({bin + "/parmon", "serve", "--listen", "127.0.0.1:0", "--store", dir + "/store"},
            dir + "/serve.out", dir + "/serve.log");
  int port = 0;
  for (int i = 0; i < 3000 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    port = atoi(Slurp(dir + "/serve.out").c_str());
  }
  std::string addr = "127.0.0.1:" + std::to_string(port);
  long rss0 = RssKib(serve);
  printf("collector %s, RSS %ld KiB idle; %d emitting threads, %g s per rate, record --flush %s\n",
         addr.c_str(), rss0, threads, seconds, flush.c_str());
  printf("%10s %10s %12s %8s %9s %9s %9s %10s\n", "target/s", "achieved/s", "events", "lost",
         "p50 ms", "p99 ms", "identical", "RSS KiB");
  double best = 0;
  int n = 0;
  for (double rate : rates) {
    std::string session = "r" + std::to_string(n++);
    Consumed c;
    std::thread consumer(Consume, addr, session, &c);
    std::string local = dir + "/" + session + ".ptrace";
    pid_t rec = Spawn({bin + "/parmon", "record", "-q", "--flush", flush, "-o", local, "--to",
                       addr + "/" + session, "--", bin + "/live_emitter", std::to_string(threads),
                       std::to_string(rate), std::to_string(seconds)},
                      dir + "/rec.out", dir + "/rec.err");
    int status = 0;
    waitpid(rec, &status, 0);
    consumer.join();
    long long emitted = 0;
    double took = 1;
    sscanf(Slurp(dir + "/rec.out").c_str(), "emitted %lld seconds %lf", &emitted, &took);
    bool same = Slurp(local) == Slurp(dir + "/store/" + session + ".ptrace");
    auto [p50, p99] = Percentiles(c);
    double achieved = emitted / took;
    printf("%10.3g %10.3g %12llu %8llu %9.1f %9.1f %9s %10ld\n", rate, achieved,
           static_cast<unsigned long long>(c.end_events), static_cast<unsigned long long>(c.lost),
           p50, p99, same ? "yes" : "NO", RssKib(serve));
    fflush(stdout);
    if (!c.error.empty() || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      printf("  run failed: %s %s\n", c.error.c_str(), Slurp(dir + "/rec.err").c_str());
    if (same && c.ended && c.lost == 0 && achieved >= 0.95 * rate)
      best = std::max(best, achieved);
    std::filesystem::remove(local);
    std::filesystem::remove(dir + "/store/" + session + ".ptrace");
  }
  printf("highest sustained rate with zero loss through --to: %.3g events/s\n", best);
  printf("collector RSS after %d sessions: %ld KiB (%ld KiB idle)\n", n, RssKib(serve), rss0);
  kill(serve, SIGTERM);
  waitpid(serve, nullptr, 0);
  std::filesystem::remove_all(dir);
  return 0;
}
