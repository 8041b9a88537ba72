// Report throughput and memory on two traces, printed side by side:
//   generated  TraceWriter output: 8 MPI ranks doing nested regions, counters and a message to the
//              next rank every 100 events (mostly region events);
//   real       a trace this benchmark records itself: bench/halo_mpi (Isend/Irecv/Waitall halo
//              exchange on a ring, Allreduce, Barrier, Bcast) run under the real
//              `parmon record -- mpirun` (and, with --per-rank, `mpirun ... parmon record -o DIR`,
//              one file per rank whose clocks the engine aligns). MPI-dense, like the codes whose
//              reports were slow.
// For each trace three passes, each over the whole trace:
//   decode   decompress + decode every chunk of every stream (format::EventDecoder), no merge;
//   merge    decode + model::Merge's k-way merge by time, nothing consumed;
//   report   analysis::Analyze: decode, merge, every aggregate, diagnosis.
// report minus merge is the engine's share.
//
//   report_bench                       # generated 5 M and 20 M, real ~6 M events (4 ranks)
//   report_bench --events=100000000    # one generated size; the issue-6 figure is at 100 M
//   report_bench --real-events=N       # size of the recorded trace (0: none); --ranks=R; --halo=D
//                                      # doubles per message (16; OpenMPI sends up to ~32 inline)
//   report_bench --reuse               # reuse the recorded trace in $TMPDIR if it is there
//   report_bench --per-rank            # also record and read a per-rank session directory
//   report_bench --keep                # leave the generated traces in $TMPDIR; --trace=PATH reads
//                                      # PATH instead of a generated one
//
// Figures are per core: events over the CPU time of this process (user + system; the engine is
// single-threaded, and other processes on a shared machine stretch the wall time, not this).
// peak_rss_MB is the resident high-water mark during the pass alone (reset through
// /proc/self/clear_refs before it starts, Linux 4.0+): compare sizes to see it flat in events.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/engine.h"
#include "format/codec.h"
#include "format/reader.h"
#include "format/writer.h"
#include "model/merge.h"
#include "model/session.h"

namespace {

using parmon::format::Event;
using parmon::format::Kind;
using parmon::format::Source;

constexpr uint32_t kRanks = 8;
constexpr uint32_t kChunkEvents = 1 << 16;
// Events per iteration and rank that halo_mpi writes in trace mode (see halo_mpi.c).
constexpr double kHaloEventsPerIteration = 18.2;

struct Flags {
  std::string trace;      // --trace=PATH: analyse this file (written by --keep) instead
  bool keep = false;      // --keep: leave the generated traces in $TMPDIR
  bool reuse = false;     // --reuse: take the recorded trace from $TMPDIR when it is there
  bool per_rank = false;  // --per-rank: also record a per-rank session directory
  uint64_t real_events = 6000000;
  int ranks = 4;
  int halo = 16;  // --halo=N: doubles per halo message (OpenMPI sends 16 inline, 128 not)
};
Flags g_flags;

std::string TempDir() {
  const char* dir = getenv("TMPDIR");
  return dir ? dir : "/tmp";
}

std::string GeneratedPath(uint64_t events) {
  return TempDir() + "/parmon_report_bench_" + std::to_string(events) + "_" +
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

// One trace the benchmarks read: made on first use (generated or recorded), shared by its passes.
struct TraceCase {
  std::string label;
  enum Origin { kGenerated, kGiven, kLauncher, kPerRank } origin;
  uint64_t events = 0;  // generated: the size asked for; recorded: the target
  std::string path;
  bool ready = false;
  bool failed = false;
  uint64_t bytes = 0;  // on disk (all files of a session directory)
};

// What the passes measured, for the side-by-side table printed at the end.
struct Figures {
  uint64_t events = 0;
  double decode = 0, merge = 0, report = 0;           // events/s per core
  double decode_mb = 0, merge_mb = 0, report_mb = 0;  // peak RSS of the pass
};
std::vector<std::unique_ptr<TraceCase>> g_cases;
std::map<std::string, Figures> g_figures;

std::string SelfDir() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return ".";
  std::string s(self, static_cast<size_t>(n));
  return s.substr(0, s.rfind('/'));
}

// Runs argv (a program and its arguments), its output to /dev/null; true when it exits with 0.
bool RunQuietly(const std::vector<std::string>& args) {
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::perror(args[0].c_str());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

uint64_t BytesOnDisk(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    return fs::file_size(path, ec);
  uint64_t n = 0;
  for (const auto& f : fs::directory_iterator(path, ec))
    n += f.is_regular_file() ? f.file_size() : 0;
  return n;
}

// Records halo_mpi under the real `parmon record`: the launcher form (`parmon record -- mpirun`,
// one file) or the per-rank form (`mpirun ... parmon record -o DIR --`, one file per rank).
bool Record(TraceCase* c) {
  std::string dir = SelfDir();
  long iterations =
      static_cast<long>(static_cast<double>(c->events) / (g_flags.ranks * kHaloEventsPerIteration));
  std::string np = std::to_string(g_flags.ranks);
  std::vector<std::string> mpirun = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", np};
  std::vector<std::string> record = {dir + "/parmon", "record", "-q",   "--buffer-size",
                                     "64M",           "-o",     c->path};
  std::vector<std::string> app = {dir + "/halo_mpi", std::to_string(iterations), "512",
                                  std::to_string(g_flags.halo)};
  std::vector<std::string> args;
  const auto& outer = c->origin == TraceCase::kLauncher ? record : mpirun;
  const auto& inner = c->origin == TraceCase::kLauncher ? mpirun : record;
  args.insert(args.end(), outer.begin(), outer.end());
  if (c->origin == TraceCase::kLauncher)
    args.push_back("--");
  args.insert(args.end(), inner.begin(), inner.end());
  if (c->origin == TraceCase::kPerRank)
    args.push_back("--");
  args.insert(args.end(), app.begin(), app.end());
  std::string line;
  for (const auto& a : args)
    line += (line.empty() ? "" : " ") + a.substr(a.rfind('/') + 1);
  std::printf("recording: %s\n", line.c_str());
  std::error_code ec;
  std::filesystem::remove_all(c->path, ec);
  auto t0 = std::chrono::steady_clock::now();
  bool ok = RunQuietly(args);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("recorded in %.1f s wall: %s\n", s, ok ? c->path.c_str() : "FAILED");
  return ok;
}

bool Prepare(TraceCase* c) {
  if (c->ready || c->failed)
    return c->ready;
  bool ok = true;
  switch (c->origin) {
    case TraceCase::kGiven:
      break;
    case TraceCase::kGenerated:
      ok = Generate(c->path, c->events);
      break;
    case TraceCase::kLauncher:
    case TraceCase::kPerRank:
      if (!(g_flags.reuse && std::filesystem::exists(c->path)))
        ok = Record(c);
      else
        std::printf("reusing %s\n", c->path.c_str());
      break;
  }
  c->ready = ok;
  c->failed = !ok;
  c->bytes = ok ? BytesOnDisk(c->path) : 0;
  return ok;
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
  // Memory a previous pass freed stays resident in malloc's free lists, and the next pass would
  // reuse it without raising the high-water mark: hand it back first.
  malloc_trim(0);
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
}

// One stream's next event in the decode pass.
struct Head {
  const parmon::format::Stream* stream;
  size_t next_chunk = 0;
  std::vector<uint8_t> raw;
  parmon::format::EventDecoder decoder;
  Event event;
};

bool Advance(const parmon::format::TraceReader& reader, Head* h) {
  for (;;) {
    if (h->decoder.Next(&h->event))
      return true;
    if (h->next_chunk >= h->stream->chunks.size())
      return false;
    const auto& ref = h->stream->chunks[h->next_chunk++];
    if (!reader.ReadRawPayload(ref, &h->raw).ok()) {
      h->decoder = {};
      continue;
    }
    h->decoder = parmon::format::EventDecoder(
        h->raw.data(), h->raw.size(), ref.header.location, static_cast<Source>(ref.header.source),
        &reader.schema(), parmon::format::ChunkCoding(ref.header));
  }
}

// The decode pass (merge = false: stream after stream, one event at a time with EventDecoder as
// the engine does) or the merge pass: model::Merge::Run, the k-way merge by time the engine uses,
// with nothing consumed.
// Returns the events seen.
uint64_t DecodeAll(const parmon::format::TraceReader& reader, bool merge) {
  uint64_t n = 0;
  if (merge) {
    auto session = parmon::model::Session::Over(reader);
    if (!session.ok())
      return 0;
    parmon::model::Merge cursor(**session);
    cursor.Run([&](const Event& e, parmon::model::StreamIndex) {
      benchmark::DoNotOptimize(e.ts);
      ++n;
    });
    return n;
  }
  for (const auto& s : reader.streams()) {
    if (s.source == Source::kDefinitions || !s.events)
      continue;
    Head h{&s};
    while (Advance(reader, &h))
      ++n;
  }
  return n;
}

enum class Pass { kDecode, kMerge, kReport };

// One pass over one trace; sets the events/s per core and peak RSS counters and keeps them for
// the table.
void BM_Pass(benchmark::State& state, TraceCase* c, Pass pass) {
  if (!Prepare(c)) {
    state.SkipWithError("cannot make the trace");
    return;
  }
  uint64_t events = 0;
  uint64_t peak_kb = 0;
  double cpu_s = 0;
  for (auto _ : state) {
    double cpu0 = CpuSeconds();
    ResetPeakRss();
    uint64_t before_kb = ReadStatusKb("VmRSS:");
    auto reader = parmon::format::TraceReader::Open(c->path);
    if (!reader.ok()) {
      state.SkipWithError(reader.status().message().c_str());
      return;
    }
    if (pass == Pass::kReport) {
      auto session = parmon::model::Session::FromReader(std::move(*reader));
      if (!session.ok()) {
        state.SkipWithError(session.status().message().c_str());
        return;
      }
      auto results = parmon::analysis::Analyze(**session, {});
      benchmark::DoNotOptimize(results);
      events = results->summary.events;
      bool generated = c->origin == TraceCase::kGenerated;
      if (generated ? results->locations.size() != kRanks || results->links.size() != kRanks
                    : results->links.empty()) {
        state.SkipWithError("the analysis did not find every rank and link");
        return;
      }
    } else {
      events = DecodeAll(**reader, pass == Pass::kMerge);
    }
    cpu_s += CpuSeconds() - cpu0;
    uint64_t hwm = ReadStatusKb("VmHWM:");
    peak_kb = std::max(peak_kb, hwm > before_kb ? hwm - before_kb : 0);
  }
  double rate = cpu_s > 0 ? static_cast<double>(events) * state.iterations() / cpu_s : 0;
  double mb = static_cast<double>(peak_kb) / 1024.0;
  state.counters["events"] = static_cast<double>(events);
  state.counters["events/s/core"] = rate;
  state.counters["peak_rss_MB"] = mb;
  state.counters["bytes/event"] = events ? static_cast<double>(c->bytes) / events : 0;
  Figures& f = g_figures[c->label];
  f.events = std::max(f.events, events);
  (pass == Pass::kDecode ? f.decode : pass == Pass::kMerge ? f.merge : f.report) = rate;
  (pass == Pass::kDecode ? f.decode_mb : pass == Pass::kMerge ? f.merge_mb : f.report_mb) = mb;
}

void PrintTable() {
  if (g_figures.empty())
    return;
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf(
      "\nreport throughput, M events/s per core (CPU time of this process); %ld CPUs, "
      "load average %.2f at the end\n",
      sysconf(_SC_NPROCESSORS_ONLN), load[0]);
  std::printf("%-26s %12s %8s %8s %8s %8s %8s %9s\n", "trace", "events", "B/event", "decode",
              "merge", "report", "+ns/ev", "peak MB");
  for (const auto& c : g_cases) {
    auto it = g_figures.find(c->label);
    if (it == g_figures.end())
      continue;
    const Figures& f = it->second;
    // ns per event the report spends beyond decoding: the merge and the engine's analysers.
    double engine = f.report > 0 && f.decode > 0 ? 1e9 / f.report - 1e9 / f.decode : 0;
    std::printf("%-26s %12llu %8.2f %8.1f %8.1f %8.1f %8.0f %9.1f\n", c->label.c_str(),
                static_cast<unsigned long long>(f.events),
                f.events ? static_cast<double>(c->bytes) / f.events : 0, f.decode / 1e6,
                f.merge / 1e6, f.report / 1e6, engine, f.report_mb);
  }
  std::printf(
      "target: report >= 50 M events/s per core on the real trace; peak MB flat in "
      "events\n");
}

void AddCase(std::string label, TraceCase::Origin origin, uint64_t events, std::string path) {
  auto c = std::make_unique<TraceCase>();
  c->label = std::move(label);
  c->origin = origin;
  c->events = events;
  c->path = std::move(path);
  for (auto [name, pass] : {std::pair{"decode", Pass::kDecode}, std::pair{"merge", Pass::kMerge},
                            std::pair{"report", Pass::kReport}})
    benchmark::RegisterBenchmark((std::string(name) + "/" + c->label).c_str(), BM_Pass, c.get(),
                                 pass)
        ->Unit(benchmark::kSecond)
        ->Iterations(1)
        ->UseRealTime();
  g_cases.push_back(std::move(c));
}

std::string Millions(uint64_t n) {
  return n % 1000000 == 0 ? std::to_string(n / 1000000) + "M" : std::to_string(n);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> sizes = {5000000, 20000000};
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--events=", 0) == 0)
      sizes = {std::strtoull(argv[i] + 9, nullptr, 10)};
    else if (a.rfind("--real-events=", 0) == 0)
      g_flags.real_events = std::strtoull(argv[i] + 14, nullptr, 10);
    else if (a.rfind("--ranks=", 0) == 0)
      g_flags.ranks = std::max(2, std::atoi(argv[i] + 8));
    else if (a.rfind("--halo=", 0) == 0)
      g_flags.halo = std::clamp(std::atoi(argv[i] + 7), 1, 128);
    else if (a.rfind("--trace=", 0) == 0)
      g_flags.trace = argv[i] + 8;
    else if (a == "--keep")
      g_flags.keep = true;
    else if (a == "--reuse")
      g_flags.reuse = true;
    else if (a == "--per-rank")
      g_flags.per_rank = true;
    else
      rest.push_back(argv[i]);
  }
  if (!g_flags.trace.empty())
    AddCase("given", TraceCase::kGiven, 0, g_flags.trace);
  else
    for (uint64_t s : sizes)
      AddCase("generated " + Millions(s), TraceCase::kGenerated, s, GeneratedPath(s));
  if (g_flags.real_events > 0) {
    std::string stem = TempDir() + "/parmon_report_bench_halo_" + std::to_string(g_flags.ranks) +
                       "x" + std::to_string(g_flags.real_events) + "_h" +
                       std::to_string(g_flags.halo);
    std::string what = "real halo " + std::to_string(g_flags.ranks) + " ranks";
    AddCase(what, TraceCase::kLauncher, g_flags.real_events, stem + ".ptrace");
    if (g_flags.per_rank)
      AddCase(what + " per-rank", TraceCase::kPerRank, g_flags.real_events, stem + ".d");
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  PrintTable();
  if (!g_flags.keep)
    for (const auto& c : g_cases)
      if (c->origin == TraceCase::kGenerated)
        unlink(c->path.c_str());
  return 0;
}
