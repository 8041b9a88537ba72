// parmon record: run a command under the recorder. See docs/man/parmon-record.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>

#include "base/units.h"
#include "cli/commands.h"
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

}  // namespace

int RunRecord(int argc, char** argv) {
  CLI::App app{"Run a command and record what its threads, processes and ranks do.",
               "parmon record"};
  recorder::RecordOptions options;
  std::string buffer_size, overflow = "block", flight_size, window;
  app.add_option("-o,--output", options.output, "trace file to write")->capture_default_str();
  app.add_option("--buffer-size", buffer_size, "ring size per thread, e.g. 4M (default 4M)");
  app.add_option("--overflow", overflow,
                 "when a thread's ring is full: block (wait, lose nothing), drop (count what is "
                 "lost) or overwrite (flight recorder: keep the newest --flight-size)")
      ->check(CLI::IsMember({"block", "drop", "overwrite"}))
      ->capture_default_str();
  app.add_option("--flight-size", flight_size, "overwrite mode: encoded bytes kept (default 64M)");
  app.add_option("--window", window, "drain period when idle, e.g. 5ms");
  app.add_option("--max-threads", options.ring_count, "most threads alive at once (rings)")
      ->capture_default_str();
  app.add_option("--zstd-level", options.zstd_level, "compression level")->capture_default_str();
  app.add_flag("-q,--quiet", options.quiet, "no status line");
  std::string period = "10ms", mode = "trace", duration, threads;
  bool no_switches = false;
  app.add_option("-t,--period", period, "sampling period of /proc, 1ms to 60s")
      ->capture_default_str();
  app.add_option("--mode", mode,
                 "trace: keep every context switch; periodic: per-interval aggregates only")
      ->check(CLI::IsMember({"trace", "periodic"}))
      ->capture_default_str();
  app.add_option("-p,--pid", options.attach_pid, "monitor this running process (no command)");
  app.add_option("--duration", duration, "with -p: stop after this long, e.g. 10s");
  app.add_option("--threads", threads, "monitor only these thread ids, e.g. 1234,1240");
  app.add_flag("--no-switches", no_switches, "do not record context switches (sampling only)");
  app.prefix_command();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::vector<std::string> command = app.remaining();
  if (!command.empty() && command[0] == "--")
    command.erase(command.begin());
  if (options.attach_pid < 0) {
    fmt::print(stderr, "parmon record: -p needs a process id, not {}\n", options.attach_pid);
    return 2;
  }
  if (options.attach_pid > 0 && !command.empty()) {
    fmt::print(stderr, "parmon record: give either -p PID or a command, not both\n");
    return 2;
  }
  if (command.empty() && options.attach_pid == 0) {
    fmt::print(
        stderr,
        "parmon record: no command given\nusage: parmon record [options] -- CMD [ARGS...]\n");
    return 2;
  }
  sched::SchedOptions sched_options;
  if (!Option(
          buffer_size,
          [](const std::string& t) {
            return ParseSizeInRange(t, "--buffer-size", kMinRingBytes, kMaxRingBytes);
          },
          &options.ring_bytes) ||
      !Option(
          flight_size,
          [](const std::string& t) {
            return ParseSizeInRange(t, "--flight-size", kMinFlightBytes, kMaxFlightBytes);
          },
          &options.flight_bytes) ||
      !Option(
          window,
          [](const std::string& t) {
            return ParseDurationInRange(t, "--window", kMinWindowNs, kMaxWindowNs);
          },
          &options.window_ns))
    return 2;
  if (!ParseDurationInRange(period, "-t", sched::kMinPeriodNs, sched::kMaxPeriodNs).ok()) {
    fmt::print(stderr, "parmon record: -t '{}' is not a period from 1ms to 60s (try 10ms)\n",
               period);
    return 2;
  }
  sched_options.period_ns = *ParseDuration(period, "-t");
  if (options.ring_count == 0) {
    fmt::print(stderr, "parmon record: --max-threads must be at least 1\n");
    return 2;
  }
  if (!duration.empty() &&
      (options.attach_pid == 0 || !ParseDuration(duration, "--duration").ok() ||
       *ParseDuration(duration, "--duration") == 0)) {
    fmt::print(stderr, "parmon record: --duration '{}' needs -p and a duration such as 10s\n",
               duration);
    return 2;
  }
  if (!duration.empty())
    options.duration_ns = *ParseDuration(duration, "--duration");
  if (!threads.empty()) {
    std::string error;
    if (!sched::ParseThreadList(threads, &sched_options.only_tids, &error)) {
      fmt::print(stderr, "parmon record: --threads: {}\n", error);
      return 2;
    }
  }
  sched_options.periodic = mode == "periodic";
  // The preload families (libparmon_mpi's per-interval aggregates) read the mode and the period
  // from the session's shared-memory header.
  options.run_mode = sched_options.periodic ? shm::RunMode::kPeriodic : shm::RunMode::kTrace;
  options.period_ns = sched_options.period_ns;
  sched_options.attached = options.attach_pid > 0;
  sched_options.switches = !no_switches;
  options.extra_session.emplace_back("sample_period_ns", std::to_string(sched_options.period_ns));
  options.extra_session.emplace_back("mode", mode);
  if (options.attach_pid > 0)
    options.extra_session.emplace_back("attached_pid", std::to_string(options.attach_pid));
  if (!threads.empty())
    options.extra_session.emplace_back("threads", threads);
  options.overflow = overflow == "drop"        ? shm::Overflow::kDrop
                     : overflow == "overwrite" ? shm::Overflow::kOverwrite
                                               : shm::Overflow::kBlock;
  // Communication monitoring (docs/comm.md): MPI, POSIX channels and pthread waits are recorded
  // by preload libraries; each is loaded when it was built.
  options.extra_preload.emplace_back(recorder::MpiWrapperLibrary(command));
  for (const char* lib : {"libparmon_posix.so", "libparmon_pthread.so"})
    options.extra_preload.emplace_back(lib);
  if (options.attach_pid == 0) {
    // Under mpirun/srun: one file per rank in the -o directory (recorder/mpi_launch.h).
    if (Status s = recorder::ApplyMpiLaunch(&options); !s.ok()) {
      fmt::print(stderr, "parmon record: {}\n", s.message());
      return 2;
    }
  }
  recorder::Recorder rec(options);
  sched::AddSchedSources(rec, sched_options);
  auto result = rec.Run(command);
  if (!result.ok()) {
    fmt::print(stderr, "parmon record: {}\n", result.status().message());
    return 127;
  }
  return result->exit_code;
}

}  // namespace parmon::cli
