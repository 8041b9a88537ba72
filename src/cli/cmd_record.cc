// parmon record: run a command under the recorder. See docs/man/parmon-record.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "cli/commands.h"
#include "recorder/recorder.h"
#include "sched/sched.h"

namespace parmon::cli {
namespace {

// `mpirun -np N parmon record -o RUN -- app` starts one recorder per rank. Each one finds its
// rank in the launcher's environment and writes RUN/rank-<K>.ptrace, with string ids from a
// range of its own, so that readers merge the directory into one session (docs/comm.md).
struct LaunchedRank {
  int rank = 0, size = 0;
  std::string launcher, job;
};

std::optional<LaunchedRank> RankFromLauncher() {
  auto env = [](const char* name) -> std::string {
    const char* v = getenv(name);
    return v ? v : "";
  };
  LaunchedRank r;
  if (!env("OMPI_COMM_WORLD_RANK").empty()) {
    r.launcher = "openmpi";
    r.rank = std::atoi(env("OMPI_COMM_WORLD_RANK").c_str());
    r.size = std::atoi(env("OMPI_COMM_WORLD_SIZE").c_str());
    r.job = env("PMIX_NAMESPACE").empty() ? env("OMPI_MCA_ess_base_jobid") : env("PMIX_NAMESPACE");
  } else if (!env("PMI_RANK").empty()) {
    r.launcher = "pmi";
    r.rank = std::atoi(env("PMI_RANK").c_str());
    r.size = std::atoi(env("PMI_SIZE").c_str());
  } else if (!env("PMIX_RANK").empty()) {
    r.launcher = "pmix";
    r.rank = std::atoi(env("PMIX_RANK").c_str());
    r.job = env("PMIX_NAMESPACE");
  } else if (!env("SLURM_PROCID").empty() && std::atoi(env("SLURM_NTASKS").c_str()) > 1) {
    r.launcher = "slurm";  // srun -n N parmon record ...
    r.rank = std::atoi(env("SLURM_PROCID").c_str());
    r.size = std::atoi(env("SLURM_NTASKS").c_str());
    r.job = env("SLURM_JOB_ID") + "." + env("SLURM_STEP_ID");
  } else {
    return std::nullopt;
  }
  if (r.rank < 0)
    return std::nullopt;
  return r;
}

// Makes RUN a directory for the rank files; rank 0 removes files of ranks beyond this job's size
// left by an earlier, larger run. Returns the rank's file, or an error message.
std::string PrepareRankFile(const std::string& run, const LaunchedRank& r, std::string* error) {
  struct stat st;
  if (stat(run.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    unlink(run.c_str());
  mkdir(run.c_str(), 0777);
  if (stat(run.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = fmt::format("cannot create the directory {} for the ranks' files", run);
    return "";
  }
  if (r.rank == 0 && r.size > 0) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(run, ec)) {
      int k = -1;
      std::string name = entry.path().filename().string();
      if (sscanf(name.c_str(), "rank-%d.ptrace", &k) == 1 && k >= r.size)
        std::filesystem::remove(entry.path(), ec);
    }
  }
  return fmt::format("{}/rank-{}.ptrace", run, r.rank);
}

// The MPI wrappers are compiled per MPI ABI: libparmon_mpi.so for the default MPI (OpenMPI on
// Debian), libparmon_mpi_mpich.so for MPICH. PARMON_MPI=mpich|openmpi chooses; otherwise the
// command decides: a launcher whose real name says MPICH (mpirun.mpich, mpiexec.hydra), or a
// program that links libmpich. A wrapper library that meets the other MPI records nothing and
// says so (mpi_core.cc), so a wrong guess costs data, never a crash.
std::string MpiWrapperLibrary(const std::vector<std::string>& command) {
  const char* forced = getenv("PARMON_MPI");
  if (forced != nullptr && std::string(forced) == "mpich")
    return "libparmon_mpi_mpich.so";
  if (forced != nullptr && *forced != '\0')
    return "libparmon_mpi.so";
  if (command.empty())
    return "libparmon_mpi.so";
  std::string program = command[0];
  if (program.find('/') == std::string::npos) {
    const char* path = getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    for (size_t start = 0; start <= dirs.size();) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos)
        end = dirs.size();
      std::string candidate = dirs.substr(start, end - start) + "/" + program;
      if (access(candidate.c_str(), X_OK) == 0) {
        program = candidate;
        break;
      }
      start = end + 1;
    }
  }
  std::error_code ec;
  std::string real = std::filesystem::canonical(program, ec).string();
  if (ec)
    return "libparmon_mpi.so";
  std::string name = std::filesystem::path(real).filename().string();
  if (name.find("mpich") != std::string::npos || name.find("hydra") != std::string::npos)
    return "libparmon_mpi_mpich.so";
  // A program linked with MPICH names libmpich.so.N in its dynamic section, near the start.
  if (FILE* f = fopen(real.c_str(), "rb")) {
    std::string head(4u << 20, '\0');
    head.resize(fread(head.data(), 1, head.size(), f));
    fclose(f);
    if (head.compare(0, 4,
                     "\x7f"
                     "ELF") == 0 &&
        head.find("libmpich.so") != std::string::npos)
      return "libparmon_mpi_mpich.so";
  }
  return "libparmon_mpi.so";
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
  if (!buffer_size.empty() && !recorder::ParseSize(buffer_size, &options.ring_bytes)) {
    fmt::print(stderr, "parmon record: --buffer-size '{}' is not a size (try 4M or 512K)\n",
               buffer_size);
    return 2;
  }
  if (!flight_size.empty() && !recorder::ParseSize(flight_size, &options.flight_bytes)) {
    fmt::print(stderr, "parmon record: --flight-size '{}' is not a size (try 64M)\n", flight_size);
    return 2;
  }
  if (!window.empty() && !recorder::ParseDuration(window, &options.window_ns)) {
    fmt::print(stderr, "parmon record: --window '{}' is not a duration (try 5ms)\n", window);
    return 2;
  }
  sched::SchedOptions sched_options;
  if (!recorder::ParseDuration(period, &sched_options.period_ns) ||
      sched_options.period_ns < sched::kMinPeriodNs ||
      sched_options.period_ns > sched::kMaxPeriodNs) {
    fmt::print(stderr, "parmon record: -t '{}' is not a period from 1ms to 60s (try 10ms)\n",
               period);
    return 2;
  }
  if (!duration.empty() &&
      (options.attach_pid == 0 || !recorder::ParseDuration(duration, &options.duration_ns) ||
       options.duration_ns == 0)) {
    fmt::print(stderr, "parmon record: --duration '{}' needs -p and a duration such as 10s\n",
               duration);
    return 2;
  }
  if (!threads.empty()) {
    std::string error;
    if (!sched::ParseThreadList(threads, &sched_options.only_tids, &error)) {
      fmt::print(stderr, "parmon record: --threads: {}\n", error);
      return 2;
    }
  }
  sched_options.periodic = mode == "periodic";
  // The MPI wrappers (libparmon_mpi) read the mode and the interval of their per-call
  // aggregates from the environment the command inherits.
  setenv("PARMON_MODE", mode.c_str(), 1);
  setenv("PARMON_PERIOD_NS", std::to_string(sched_options.period_ns).c_str(), 1);
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
  options.extra_preload.emplace_back(MpiWrapperLibrary(command));
  for (const char* lib : {"libparmon_posix.so", "libparmon_pthread.so"})
    options.extra_preload.emplace_back(lib);
  if (options.attach_pid == 0) {
    if (auto launched = RankFromLauncher()) {
      std::string error;
      std::string file = PrepareRankFile(options.output, *launched, &error);
      if (file.empty()) {
        fmt::print(stderr, "parmon record: {}\n", error);
        return 2;
      }
      options.output = file;
      // 2^20 string ids per rank below 2^31 (ids from 2^31 are the runtime's unrecorded ones).
      options.first_string_id = 1 + static_cast<uint32_t>(launched->rank % 2048) * (1u << 20);
      options.extra_session.emplace_back("mpi_rank", std::to_string(launched->rank));
      options.extra_session.emplace_back("mpi_size", std::to_string(launched->size));
      options.extra_session.emplace_back("launcher", launched->launcher);
      if (!launched->job.empty())
        options.extra_session.emplace_back("job", launched->job);
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
