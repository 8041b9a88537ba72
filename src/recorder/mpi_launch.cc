#include "recorder/mpi_launch.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "format/string_ids.h"

namespace parmon::recorder {
namespace {

// Reads exactly n bytes at off; false on a short read (a truncated or unreadable file).
bool ReadAt(int fd, uint64_t off, void* out, size_t n) {
  return pread(fd, out, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n);
}

// Whether the 64-bit ELF file at path has a DT_NEEDED entry containing `name`. Reads the ELF and
// program headers, the dynamic segment and its string table only (a few kilobytes), not the
// whole program; anything that is not a well-formed 64-bit ELF with a dynamic segment is "no".
bool NeedsLibrary(const std::string& path, const char* name) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  Elf64_Ehdr eh;
  if (!ReadAt(fd, 0, &eh, sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phnum == 0 || eh.e_phnum > 4096)
    return false;
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!ReadAt(fd, eh.e_phoff, ph.data(), ph.size() * sizeof(Elf64_Phdr)))
    return false;
  const Elf64_Phdr* dynamic = nullptr;
  for (const auto& p : ph)
    if (p.p_type == PT_DYNAMIC)
      dynamic = &p;
  constexpr uint64_t kMaxBytes = 4u << 20;
  if (dynamic == nullptr || dynamic->p_filesz > kMaxBytes)
    return false;
  std::vector<Elf64_Dyn> dyn(dynamic->p_filesz / sizeof(Elf64_Dyn));
  if (!ReadAt(fd, dynamic->p_offset, dyn.data(), dyn.size() * sizeof(Elf64_Dyn)))
    return false;
  uint64_t strtab = 0, strsz = 0;
  std::vector<uint64_t> needed;
  for (const auto& d : dyn) {
    if (d.d_tag == DT_NULL)
      break;
    if (d.d_tag == DT_STRTAB)
      strtab = d.d_un.d_ptr;
    else if (d.d_tag == DT_STRSZ)
      strsz = d.d_un.d_val;
    else if (d.d_tag == DT_NEEDED)
      needed.push_back(d.d_un.d_val);
  }
  // DT_STRTAB is an address: the file offset is where the loadable segment holding it starts.
  uint64_t str_off = UINT64_MAX;
  for (const auto& p : ph)
    if (p.p_type == PT_LOAD && strtab >= p.p_vaddr && strtab - p.p_vaddr < p.p_filesz)
      str_off = p.p_offset + (strtab - p.p_vaddr);
  if (needed.empty() || str_off == UINT64_MAX || strsz == 0 || strsz > kMaxBytes)
    return false;
  std::string strings(strsz, '\0');
  if (!ReadAt(fd, str_off, strings.data(), strsz))
    return false;
  for (uint64_t at : needed)
    if (at < strsz && std::strstr(strings.c_str() + at, name) != nullptr)
      return true;
  return false;
}

}  // namespace

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
  // A program linked with MPICH needs libmpich.so.N (C) or libmpichfort.so.N (Fortran, which
  // needs libmpich itself).
  if (NeedsLibrary(real, "libmpich"))
    return "libparmon_mpi_mpich.so";
  return "libparmon_mpi.so";
}

}  // namespace parmon::recorder
