// Report throughput and memory: generates a trace with TraceWriter (8 MPI ranks doing nested
// regions, counters and a message to the next rank every 100 events), then times the analysis
// engine over it (decode, merge, every aggregate, diagnosis) and measures its peak memory.
//
//   report_bench                         # 5 M and 20 M events (quick, for CI)
//   report_bench --events=100000000      # one size; the figure is at 100 M
//   report_bench --events=N --keep       # leave the trace in $TMPDIR; --trace=PATH reuses it
//
// Counters: events/s (one thread: the engine is single-threaded, so this is per core) and
// peak_rss_MB, the process's resident high-water mark during the analysis alone (reset through
// /proc/self/clear_refs before it starts, Linux 4.0+). The trace size does not change peak
// memory: compare the two sizes.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "analysis/engine.h"
#include "format/codec.h"
#include "format/reader.h"
#include "format/writer.h"
#include "model/session.h"

namespace {

using parmon::format::Event;
using parmon::format::Kind;
using parmon::format::Source;

constexpr uint32_t kRanks = 8;
std::string g_trace;  // --trace=PATH: analyse this file (written by --keep) instead
bool g_keep = false;  // --keep: leave the generated trace in $TMPDIR
constexpr uint32_t kChunkEvents = 1 << 16;

std::string TracePath(uint64_t events) {
  const char* dir = getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/parmon_report_bench_" + std::to_string(events) + "_" +
         std::to_string(getpid()) + ".ptrace";
}

void Def(parmon::format::StreamEncoder* defs,
         Kind kind,
         std::vector<uint64_t> args,
         const std::string& payload) {
  Event e;
  e.kind = static_cast<uint16_t>(kind);
  e.nargs = static_cast<uint8_t>(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    e.args[i] = args[i];
  e.payload = payload;
  defs->Append(e);
}

void Emit(parmon::format::StreamEncoder* enc, Kind kind, uint64_t ts, std::vector<uint64_t> args) {
  Event e;
  e.ts = ts;
  e.kind = static_cast<uint16_t>(kind);
  e.nargs = static_cast<uint8_t>(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    e.args[i] = args[i];
  enc->Append(e);
}

// Writes `events` events spread over kRanks locations, each location's events in time order.
bool Generate(const std::string& path, uint64_t events) {
  auto w = parmon::format::TraceWriter::Create(path);
  if (!w.ok())
    return false;
  auto& writer = **w;
  uint64_t t0 = 1000000;
  uint64_t per_rank = events / kRanks;
  uint64_t step = 100;  // ns between events
  uint64_t end = t0 + per_rank * step + 1000;
  if (!writer
           .WriteSession(
               {{"command", "report_bench"}, {"start_ts", std::to_string(t0)}, {"cpus", "8"}})
           .ok())
    return false;
  parmon::format::StreamEncoder defs(0, Source::kDefinitions);
  for (uint32_t r = 0; r < kRanks; ++r) {
    Def(&defs, Kind::kDefProcess, {1000 + r, 1}, "report_bench");
    Def(&defs, Kind::kDefLocation, {r + 1, 1, 1000 + r, 1000 + r}, "rank");
  }
  const char* names[] = {"solve", "exchange", "update", "residual"};
  for (uint32_t i = 0; i < 4; ++i)
    Def(&defs, Kind::kDefString, {10 + i, 1}, names[i]);
  Def(&defs, Kind::kDefString, {20, 5}, "MPI_Send");
  Def(&defs, Kind::kDefString, {21, 5}, "MPI_Recv");
  Def(&defs, Kind::kDefString, {30, 2}, "iterations");
  if (!writer.Flush(&defs).ok())
    return false;
  // Rank by rank: a location's stream is independent of the others' in the file.
  for (uint32_t r = 0; r < kRanks; ++r) {
    parmon::format::StreamEncoder enc(r + 1, Source::kRuntime);
    uint64_t ts = t0;
    Emit(&enc, Kind::kMpiInit, ts, {r, kRanks, 0});
    uint64_t n = 1;
    uint64_t k = 0;
    while (n < per_rank) {
      // A 100-event cycle: 2 x (outer region, 20 inner enter/leave, counter), then a
      // send to the next rank and a receive from the previous one (6 events).
      if (k % 100 < 94) {
        uint64_t phase = k % 47;
        if (phase == 0)
          Emit(&enc, Kind::kRegionEnter, ts, {10});
        else if (phase == 45)
          Emit(&enc, Kind::kRegionLeave, ts, {10});
        else if (phase == 46)
          Emit(&enc, Kind::kCounterInt, ts, {30, k});
        else
          enc.AppendOneArg(
              static_cast<uint16_t>(phase % 2 ? Kind::kRegionEnter : Kind::kRegionLeave), ts,
              11 + ((phase - 1) / 2) % 3);
        ++n;
      } else if (k % 100 == 94) {
        uint64_t tag = k / 100;
        Emit(&enc, Kind::kMpiEnter, ts, {20});
        Emit(&enc, Kind::kMpiSend, ts, {(r + 1) % kRanks, tag, 1, 4096, 0});
        Emit(&enc, Kind::kMpiLeave, ts + step / 2, {20});
        Emit(&enc, Kind::kMpiEnter, ts + step, {21});
        ts += 4 * step;
        Emit(&enc, Kind::kMpiRecv, ts, {(r + kRanks - 1) % kRanks, tag, 1, 4096, 0, ts - 2 * step});
        Emit(&enc, Kind::kMpiLeave, ts, {21});
        n += 6;
        k += 5;
      }
      ++k;
      ts += step;
      if (enc.count() >= kChunkEvents && !writer.Flush(&enc).ok())
        return false;
    }
    if (enc.count() && !writer.Flush(&enc).ok())
      return false;
  }
  return writer.Finish({{"end_ts", std::to_string(end)}}).ok();
}

uint64_t ReadStatusKb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0)
      return std::strtoull(line.c_str() + strlen(field), nullptr, 10);
  return 0;
}

double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

void ResetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
}

void BM_Report(benchmark::State& state) {
  uint64_t events = static_cast<uint64_t>(state.range(0));
  std::string path = g_trace.empty() ? TracePath(events) : g_trace;
  if (g_trace.empty() && !Generate(path, events)) {
    state.SkipWithError("cannot write the trace");
    return;
  }
  uint64_t analysed = 0;
  uint64_t peak_kb = 0;
  double cpu_s = 0;
  for (auto _ : state) {
    double cpu0 = CpuSeconds();
    ResetPeakRss();
    uint64_t before_kb = ReadStatusKb("VmRSS:");
    auto session = parmon::model::Session::Open(path);
    if (!session.ok()) {
      state.SkipWithError(session.status().message().c_str());
      break;
    }
    auto results = parmon::analysis::Analyze(**session, {});
    benchmark::DoNotOptimize(results);
    analysed = results->summary.events;
    cpu_s += CpuSeconds() - cpu0;
    uint64_t hwm = ReadStatusKb("VmHWM:");
    peak_kb = std::max(peak_kb, hwm > before_kb ? hwm - before_kb : 0);
    if (results->locations.size() != kRanks || results->links.size() != kRanks)
      state.SkipWithError("the analysis did not find every rank and link");
  }
  if (g_trace.empty() && !g_keep)
    unlink(path.c_str());
  state.counters["events"] = static_cast<double>(analysed);
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(analysed) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  // Per core: the engine is one thread, so events over the CPU time it used (other processes on a
  // shared machine stretch the wall time, not this).
  state.counters["events/s/core"] =
      cpu_s > 0 ? static_cast<double>(analysed) * state.iterations() / cpu_s : 0;
  state.counters["peak_rss_MB"] = static_cast<double>(peak_kb) / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  // --events=N: analyse one trace of N events (e.g. 100000000) instead of the quick sizes.
  std::vector<int64_t> sizes = {5000000, 20000000};
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (strncmp(argv[i], "--events=", 9) == 0)
      sizes = {std::strtoll(argv[i] + 9, nullptr, 10)};
    else if (strncmp(argv[i], "--trace=", 8) == 0)
      g_trace = argv[i] + 8;
    else if (strcmp(argv[i], "--keep") == 0)
      g_keep = true;
    else
      rest.push_back(argv[i]);
  }
  auto* b = benchmark::RegisterBenchmark("BM_Report", BM_Report)
                ->Unit(benchmark::kSecond)
                ->Iterations(1)
                ->UseRealTime();
  for (int64_t s : sizes)
    b->Arg(s);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
