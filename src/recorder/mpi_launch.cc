#include "recorder/mpi_launch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "format/string_ids.h"

namespace parmon::recorder {

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

StatusOr<std::string> PrepareRankFile(const std::string& run, const LaunchedRank& r) {
  struct stat st;
  if (stat(run.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    unlink(run.c_str());
  mkdir(run.c_str(), 0777);
  if (stat(run.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::Error(fmt::format("cannot create the directory {} for the ranks' files", run));
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

Status ApplyMpiLaunch(RecordOptions* options) {
  auto launched = RankFromLauncher();
  if (!launched)
    return Status::Ok();
  PARMON_ASSIGN_OR_RETURN(options->output, PrepareRankFile(options->output, *launched));
  // A range of string ids of its own for every rank of the job (format/string_ids.h).
  options->first_string_id = format::RankFirstStringId(static_cast<uint32_t>(launched->rank),
                                                       static_cast<uint32_t>(launched->size));
  options->extra_session.emplace_back("mpi_rank", std::to_string(launched->rank));
  options->extra_session.emplace_back("mpi_size", std::to_string(launched->size));
  options->extra_session.emplace_back("launcher", launched->launcher);
  if (!launched->job.empty())
    options->extra_session.emplace_back("job", launched->job);
  return Status::Ok();
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

}  // namespace parmon::recorder
