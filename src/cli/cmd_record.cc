// parmon record: run a command under the recorder. See docs/man/parmon-record.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "base/units.h"
#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "live/record_to.h"
#include "recorder/control.h"
#include "recorder/mpi_launch.h"
#include "recorder/recorder.h"
#include "sched/sched.h"

namespace parmon::cli {
namespace {

// The documented limits of the command line's sizes and durations (docs/man/parmon-record.md).
constexpr uint64_t kMinRingBytes = 64u << 10;  // the segment rounds anything up to 128 KiB
constexpr uint64_t kMaxRingBytes = 1ull << 30;
constexpr uint64_t kMinFlightBytes = 64u << 10;
constexpr uint64_t kMaxFlightBytes = 64ull << 30;
constexpr uint64_t kMinWindowNs = 100'000;         // 100 us
constexpr uint64_t kMaxWindowNs = 10'000'000'000;  // 10 s
// Rings in the segment: each is --buffer-size of shared memory, so their number is bounded too.
constexpr uint64_t kMaxRings = 65536;
constexpr uint64_t kMinFlushNs = 10'000'000;      // 10 ms
constexpr uint64_t kMaxFlushNs = 10'000'000'000;  // 10 s

// Parses one size or duration option into *out; false after printing the one-sentence error.
template <typename Parse>
bool Option(const std::string& text, Parse parse, uint64_t* out) {
  if (text.empty())
    return true;
  auto v = parse(text);
  if (!v.ok()) {
    fmt::print(stderr, "parmon record: {}\n", v.status().message());
    return false;
  }
  *out = *v;
  return true;
}

// The command line of `parmon record`, as given.
struct RecordArgs {
  recorder::RecordOptions options;
  std::string buffer_size, overflow = "block", flight_size, window, flush;
  std::string period = "10ms", mode = "trace", duration, threads;
  bool no_switches = false;
  std::string switch_budget;  // --switch-budget PCT | none
  bool switches = false;      // periodic mode's switch records (off by default there)
  bool libomp = false;        // --libomp: preload LLVM's libomp (docs/openmp.md)
  bool pid_given = false;     // -p appeared (0 is then an error, not "no -p")
  std::vector<std::string> command;
  live::RecordToArgs to;  // --to: stream to a collector (live/record_to.h)
};

void DeclareOptions(CLI::App& app, RecordArgs& a) {
  app.add_option("-o,--output", a.options.output, "trace file to write")->capture_default_str();
  app.add_option("--buffer-size", a.buffer_size, "ring size per thread, e.g. 4M (default 4M)");
  app.add_option("--overflow", a.overflow,
                 "when a thread's ring is full: block (wait, lose nothing), drop (count what is "
                 "lost) or overwrite (flight recorder: keep the newest --flight-size)")
      ->check(CLI::IsMember({"block", "drop", "overwrite"}))
      ->capture_default_str();
  app.add_option("--flight-size", a.flight_size,
                 "overwrite mode: encoded bytes kept (default 64M)");
  app.add_option("--window", a.window, "drain period when idle, e.g. 5ms");
  app.add_option("--flush", a.flush,
                 "longest time a drained event waits before it is written, 10ms to 10s "
                 "(default 100ms): what a killed recorder can lose");
  app.add_option("--max-threads", a.options.ring_count, "most threads alive at once (rings)")
      ->capture_default_str();
  app.add_option("--zstd-level", a.options.zstd_level, "compression level, 1 to 19")
      ->check(CLI::Range(1, 19))
      ->capture_default_str();
  app.add_flag("-q,--quiet", a.options.quiet, "no status line");
  app.add_option("-t,--period", a.period, "sampling period of /proc, 1ms to 60s")
      ->capture_default_str();
  app.add_option("--mode", a.mode,
                 "trace: keep every context switch; periodic: per-interval aggregates only")
      ->check(CLI::IsMember({"trace", "periodic"}))
      ->capture_default_str();
  app.add_option("-p,--pid", a.options.attach_pid, "monitor this running process (no command)");
  app.add_option("--duration", a.duration, "with -p: stop after this long, e.g. 10s");
  app.add_option("--threads", a.threads, "monitor only these thread ids, e.g. 1234,1240");
  app.add_flag("--no-switches", a.no_switches,
               "trace mode: do not record context switches (sampling only)");
  app.add_option("--switch-budget", a.switch_budget,
                 "trace mode: stop the context-switch records when they would cost more than "
                 "this percent of the program's CPU (default 5; 0 or none: keep them all)");
  app.add_flag("--switches", a.switches,
               "periodic mode: count context switches from switch records too (they cost the "
               "program's threads about 1 us a switch)");
  app.add_flag("--libomp", a.libomp,
               "run the program's OpenMP on LLVM's libomp, whose OMPT parmon records (GCC's "
               "libgomp has none)");
  app.add_option("--to", a.to.to, "also stream the session to a collector, HOST:PORT[/NAME]");
  app.add_option("--to-linger", a.to.linger, "with --to: how long to keep delivering after the run")
      ->capture_default_str();
  app.add_option("--token-file", a.to.token_file, "with --to: file holding the collector's token");
}

// Either a command or -p PID. False after printing why not.
bool CheckCommand(const RecordArgs& a) {
  if (a.pid_given && a.options.attach_pid <= 0) {
    fmt::print(stderr, "parmon record: -p {} is not a valid process id\n", a.options.attach_pid);
    return false;
  }
  if (a.options.attach_pid > 0 && !a.command.empty()) {
    fmt::print(stderr, "parmon record: give either -p PID or a command, not both\n");
    return false;
  }
  if (a.command.empty() && a.options.attach_pid == 0) {
    fmt::print(
        stderr,
        "parmon record: no command given\nusage: parmon record [options] -- CMD [ARGS...]\n");
    return false;
  }
  return true;
}

// Sizes, durations and thread lists (base/units.h). False after printing the one-sentence error.
bool ParseValues(RecordArgs& a, sched::SchedOptions* sched_options) {
  if (!Option(
          a.buffer_size,
          [](const std::string& t) {
            return ParseSizeInRange(t, "--buffer-size", kMinRingBytes, kMaxRingBytes);
          },
          &a.options.ring_bytes) ||
      !Option(
          a.flight_size,
          [](const std::string& t) {
            return ParseSizeInRange(t, "--flight-size", kMinFlightBytes, kMaxFlightBytes);
          },
          &a.options.flight_bytes) ||
      !Option(
          a.window,
          [](const std::string& t) {
            return ParseDurationInRange(t, "--window", kMinWindowNs, kMaxWindowNs);
          },
          &a.options.window_ns) ||
      !Option(
          a.flush,
          [](const std::string& t) {
            return ParseDurationInRange(t, "--flush", kMinFlushNs, kMaxFlushNs);
          },
          &a.options.flush_ns))
    return false;
  if (!ParseDurationInRange(a.period, "-t", sched::kMinPeriodNs, sched::kMaxPeriodNs).ok()) {
    fmt::print(stderr, "parmon record: -t '{}' is not a period from 1ms to 60s (try 10ms)\n",
               a.period);
    return false;
  }
  sched_options->period_ns = *ParseDuration(a.period, "-t");
  if (a.options.ring_count == 0 || a.options.ring_count > kMaxRings) {
    fmt::print(stderr, "parmon record: --max-threads {} is not from 1 to {}\n",
               a.options.ring_count, kMaxRings);
    return false;
  }
  if (!a.duration.empty() &&
      (a.options.attach_pid == 0 || !ParseDuration(a.duration, "--duration").ok() ||
       *ParseDuration(a.duration, "--duration") == 0)) {
    fmt::print(stderr, "parmon record: --duration '{}' needs -p and a duration such as 10s\n",
               a.duration);
    return false;
  }
  if (!a.duration.empty())
    a.options.duration_ns = *ParseDuration(a.duration, "--duration");
  if (!a.switch_budget.empty()) {
    std::string error;
    if (!sched::ParseSwitchBudget(a.switch_budget, &sched_options->switch_budget, &error)) {
      fmt::print(stderr, "parmon record: --switch-budget: {}\n", error);
      return false;
    }
  }
  if (!a.threads.empty()) {
    std::string error;
    if (!sched::ParseThreadList(a.threads, &sched_options->only_tids, &error)) {
      fmt::print(stderr, "parmon record: --threads: {}\n", error);
      return false;
    }
  }
  return true;
}

// The mode, the session values and the preload families; false after printing an error.
bool Configure(RecordArgs& a, sched::SchedOptions* sched_options) {
  if (a.switches && a.no_switches) {
    fmt::print(stderr, "parmon record: --switches and --no-switches contradict each other\n");
    return false;
  }
  sched_options->periodic = a.mode == "periodic";
  // The preload families (libparmon_mpi's per-interval aggregates) read the mode and the period
  // from the session's shared-memory header.
  a.options.run_mode = sched_options->periodic ? shm::RunMode::kPeriodic : shm::RunMode::kTrace;
  a.options.period_ns = sched_options->period_ns;
  sched_options->attached = a.options.attach_pid > 0;
  // Periodic mode keeps no single switch, only per-interval counts, which cost the program as much
  // as the trace mode's records (two kernel records per switch, written on its own threads): it
  // records them only when asked. Its states come from the sampler either way.
  sched_options->switches = sched_options->periodic ? a.switches : !a.no_switches;
  if (!a.switch_budget.empty() && (sched_options->periodic || a.no_switches)) {
    fmt::print(stderr,
               "parmon record: --switch-budget applies to trace mode's context-switch records, "
               "not to {}\n",
               a.no_switches ? "--no-switches" : "--mode periodic");
    return false;
  }
  if (sched_options->switches && !sched_options->periodic)
    a.options.extra_session.emplace_back(
        "switch_budget_ppm", std::to_string(std::llround(sched_options->switch_budget * 1e6)));
  a.options.extra_session.emplace_back("sample_period_ns",
                                       std::to_string(sched_options->period_ns));
  a.options.extra_session.emplace_back("mode", a.mode);
  if (a.options.attach_pid > 0)
    a.options.extra_session.emplace_back("attached_pid", std::to_string(a.options.attach_pid));
  if (!a.threads.empty())
    a.options.extra_session.emplace_back("threads", a.threads);
  a.options.overflow = a.overflow == "drop"        ? shm::Overflow::kDrop
                       : a.overflow == "overwrite" ? shm::Overflow::kOverwrite
                                                   : shm::Overflow::kBlock;
  // Communication monitoring (docs/comm.md): MPI, POSIX channels and pthread waits are recorded
  // by preload libraries; each is loaded when it was built.
  a.options.extra_preload.emplace_back(recorder::MpiWrapperLibrary(a.command));
  for (const char* lib : {"libparmon_posix.so", "libparmon_pthread.so", "libparmon_omp.so"})
    a.options.extra_preload.emplace_back(lib);
  if (a.libomp) {
#ifdef PARMON_LIBOMP
    a.options.extra_preload.emplace_back(PARMON_LIBOMP);
#else
    fmt::print(stderr, "parmon record: --libomp: this parmon was built without LLVM's libomp\n");
    return false;
#endif
  }
  if (a.options.attach_pid == 0) {
    // Under mpirun/srun: one file per rank in the -o directory (recorder/mpi_launch.h).
    if (Status s = recorder::ApplyMpiLaunch(&a.options); !s.ok()) {
      fmt::print(stderr, "parmon record: {}\n", s.message());
      return false;
    }
  }
  return true;
}

}  // namespace

int RunRecord(int argc, char** argv) {
  CLI::App app{"Run a command and record what its threads, processes and ranks do.",
               "parmon record"};
  RecordArgs a;
  DeclareOptions(app, a);
  app.prefix_command();
  if (int rc = ParseCommandLine(app, argc, argv, "record"); rc >= 0)
    return rc;
  a.command = app.remaining();
  // An option this command does not know is a misspelling, not the program to run.
  if (!a.command.empty() && a.command[0].size() > 1 && a.command[0][0] == '-' &&
      a.command[0] != "--")
    return UnknownOption(app, "record", a.command[0]);
  if (!a.command.empty() && a.command[0] == "--")
    a.command.erase(a.command.begin());
  a.pid_given = app.count("-p") > 0;
  sched::SchedOptions sched_options;
  bool spooled = !a.to.to.empty() && app.count("-o") == 0;
  if (spooled)
    a.options.output = live::SpoolPath();
  if (!CheckCommand(a) || !ParseValues(a, &sched_options) || !Configure(a, &sched_options))
    return 2;
  // `parmon ctl HOST:PORT SESSION CMD` reaches this recorder through the collector: the
  // forwarder's thread hands the command to the recorder's control (docs/control.md) while the
  // recorder runs; the forwarder (and its thread) is gone before the recorder is.
  std::atomic<recorder::Recorder*> controlled{nullptr};
  std::unique_ptr<live::Forwarder> forwarder;
  if (!a.to.to.empty()) {
    live::ControlHandler handler = [&controlled](const std::string& command) -> std::string {
      recorder::Recorder* r = controlled.load(std::memory_order_acquire);
      if (r == nullptr)
        return "error: the recorder is not recording a session (not started yet, or finished)";
      return recorder::ApplyControl(*r, command);
    };
    auto f = live::StartStreaming(a.to, a.options.output, a.command, a.options.attach_pid, handler);
    if (!f.ok()) {
      fmt::print(stderr, "parmon record: {}\n", f.status().message());
      return 2;
    }
    forwarder = std::move(*f);
  }
  recorder::Recorder rec(a.options);
  sched::AddSchedSources(rec, sched_options);
  controlled.store(&rec, std::memory_order_release);
  auto result = rec.Run(a.command);
  controlled.store(nullptr, std::memory_order_release);
  if (forwarder) {
    (void)live::FinishStreaming(*forwarder, a.options.output, spooled && result.ok());
    forwarder.reset();
  }
  if (!result.ok()) {
    fmt::print(stderr, "parmon record: {}\n", result.status().message());
    return 127;
  }
  return result->exit_code;
}

}  // namespace parmon::cli
