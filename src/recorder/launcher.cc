#include "recorder/launcher.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "runtime/shm_abi.h"

namespace parmon::recorder {
namespace {

std::string ExeDir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return ".";
  buf[n] = '\0';
  std::string path(buf);
  return path.substr(0, path.rfind('/'));
}

bool FileExists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

// The child between fork and exec: only async-signal-safe calls (and setenv, as before: the
// recorder is single-threaded when it forks).
[[noreturn]] void ExecChild(char** argv,
                            const char* segment,
                            const char* preload,
                            int go_fd,
                            int err_fd) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setenv(shm::kEnvSegment, segment, 1);
  setenv("LD_PRELOAD", preload, 1);
  char go;
  while (read(go_fd, &go, 1) < 0 && errno == EINTR) {
  }
  execvp(argv[0], argv);
  int e = errno;
  ssize_t w = write(err_fd, &e, sizeof e);
  (void)w;
  _exit(127);
}

}  // namespace

std::string LibDir() {
  if (const char* d = getenv("PARMON_LIB_DIR"))
    return d;
  std::string exe = ExeDir();
  for (const std::string& d : {exe + "/../lib", exe + "/../" PARMON_INSTALL_LIBDIR, exe})
    if (FileExists(d + "/libparmon.so"))
      return d;
  return exe + "/../lib";
}

StatusOr<std::string> PreloadList(const std::vector<std::string>& extra_preload) {
  std::string lib_dir = LibDir();
  std::string preload = lib_dir + "/libparmon.so";
  if (!FileExists(preload))
    return Status::Error(
        fmt::format("cannot find libparmon.so (looked in {}); set PARMON_LIB_DIR "
                    "to the directory that holds it",
                    lib_dir));
  for (const auto& extra : extra_preload) {
    std::string p = extra.find('/') == std::string::npos ? lib_dir + "/" + extra : extra;
    if (!FileExists(p)) {
      // The communication libraries are optional (libparmon_mpi needs an MPI at build time).
      if (extra.rfind("libparmon_", 0) == 0)
        continue;
      return Status::Error(fmt::format("cannot find preload library {}", p));
    }
    preload = p + ":" + preload;
  }
  if (const char* old = getenv("LD_PRELOAD"); old && *old)
    preload += std::string(":") + old;
  return preload;
}

StatusOr<pid_t> StartCommand(const std::vector<std::string>& argv,
                             const std::string& segment_name,
                             const std::string& preload,
                             const std::function<void(pid_t)>& on_created) {
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0)
    return Status::Error(fmt::format("cannot create a pipe: {}", strerror(errno)));
  int go_pipe[2];  // the child execs once the sources have seen it
  if (pipe2(go_pipe, O_CLOEXEC) != 0) {
    close(err_pipe[0]);
    close(err_pipe[1]);
    return Status::Error(fmt::format("cannot create a pipe: {}", strerror(errno)));
  }
  std::vector<char*> cargv;
  for (const auto& a : argv)
    cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0)
    return Status::Error(fmt::format("cannot fork: {}", strerror(errno)));
  if (pid == 0) {
    close(go_pipe[1]);
    ExecChild(cargv.data(), segment_name.c_str(), preload.c_str(), go_pipe[0], err_pipe[1]);
  }
  close(err_pipe[1]);
  close(go_pipe[0]);
  on_created(pid);
  close(go_pipe[1]);  // end of file: the child goes on to exec
  int child_errno = 0;
  ssize_t r;
  do {
    r = read(err_pipe[0], &child_errno, sizeof child_errno);
  } while (r < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (r == sizeof child_errno) {
    waitpid(pid, nullptr, 0);
    return Status::Error(fmt::format("cannot run {}: {}", argv[0], strerror(child_errno)));
  }
  return pid;
}

bool ProcessAlive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno != EPERM)
    return false;
  std::string stat = ReadProcFile(fmt::format("/proc/{}/stat", pid));
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

Status CheckAttachable(pid_t pid) {
  if (pid == getpid())
    return Status::Error("parmon cannot follow itself");
  if (kill(pid, 0) != 0) {
    if (errno == ESRCH)
      return Status::Error(fmt::format("there is no process {}", pid));
    if (errno == EPERM)
      return Status::Error(
          fmt::format("process {} belongs to another user; run parmon as that "
                      "user or as root",
                      pid));
  }
  if (!ProcessAlive(pid))
    return Status::Error(fmt::format("process {} has already exited", pid));
  return Status::Ok();
}

AttachedProcess DescribeProcess(pid_t pid) {
  AttachedProcess a;
  auto slurp = [](const std::string& path) {
    std::string text;
    if (FILE* f = fopen(path.c_str(), "re")) {
      char buf[4096];
      size_t n;
      // Bounded: a command line longer than this is cut (the kernel itself caps what it shows).
      while (text.size() < (1u << 20) && (n = fread(buf, 1, sizeof buf, f)) > 0)
        text.append(buf, n);
      fclose(f);
    }
    return text;
  };
  const std::string cmdline = slurp(fmt::format("/proc/{}/cmdline", pid));
  for (size_t at = 0; at < cmdline.size();) {
    size_t end = cmdline.find('\0', at);
    if (end == std::string::npos)
      end = cmdline.size();
    a.argv.push_back(cmdline.substr(at, end - at));
    at = end + 1;
  }
  // stat: "pid (comm) state ppid ...": the comm may hold spaces and parentheses, so after the
  // last ')'.
  const std::string stat = slurp(fmt::format("/proc/{}/stat", pid));
  const size_t paren = stat.rfind(')');
  if (paren != std::string::npos) {
    char state = 0;
    int ppid = 0;
    if (sscanf(stat.c_str() + paren + 1, " %c %d", &state, &ppid) == 2)
      a.ppid = ppid;
  }
  return a;
}

int OpenSignalChannel() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT})
    sigaddset(&mask, s);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  int fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  // Orphaned grandchildren come to us, so the session follows every process the command starts.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  return fd;
}

std::string ReadProcFile(const std::string& path) {
  std::string s;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return s;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    s.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0'))
    s.pop_back();
  return s;
}

}  // namespace parmon::recorder
