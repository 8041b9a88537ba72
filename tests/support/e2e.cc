#include "support/e2e.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace parmon::testing {

std::string ParmonBin() {
  return PARMON_TEST_BIN_DIR "/parmon";
}
bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string BinDir() {
  return PARMON_TEST_BIN_DIR;
}
std::string LibDir() {
  return PARMON_TEST_LIB_DIR;
}

RunResult Run(const std::vector<std::string>& argv,
              const std::vector<std::string>& env,
              double timeout_s) {
  RunResult result;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
    return result;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    setpgid(0, 0);
    for (const auto& e : env)
      putenv(strdup(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    fprintf(stderr, "cannot run %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  bool killed = false;
  char buf[65536];
  while (open_fds > 0) {
    int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  deadline - std::chrono::steady_clock::now())
                                  .count());
    if (ms <= 0 && !killed) {
      kill(-pid, SIGKILL);
      killed = true;
      ms = 1000;
    }
    int n = poll(fds, 2, std::max(ms, 1));
    if (n <= 0)
      continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t r = read(fds[i].fd, buf, sizeof buf);
      if (r <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(r));
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.exit_code = 128 + WTERMSIG(status);
  return result;
}

RunResult Parmon(const std::vector<std::string>& args, double timeout_s) {
  std::vector<std::string> argv = {ParmonBin()};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv, {}, timeout_s);
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "parmon-test-XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* p = mkdtemp(buf.data());
  path_ = p ? p : "/tmp";
}

TempDir::~TempDir() {
  if (!getenv("PARMON_KEEP_TEST_FILES") && path_ != "/tmp") {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<Truth> ParseTruth(const std::string& out) {
  // The numeric fields of a "thread k=v ..." line.
  static const std::map<std::string, uint64_t Truth::*> kFields = {
      {"start", &Truth::start},
      {"end", &Truth::end},
      {"cpu", &Truth::cpu},
      {"blocked", &Truth::blocked},
      {"read_begin", &Truth::read_begin},
      {"read_end", &Truth::read_end},
      {"cpu_at_read", &Truth::cpu_at_read},
      {"voluntary", &Truth::voluntary},
      {"involuntary", &Truth::involuntary},
      {"sched_run", &Truth::sched_run},
      {"sched_delay", &Truth::sched_delay}};
  std::vector<Truth> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("thread ", 0) != 0)
      continue;
    Truth t;
    std::istringstream f(line.substr(7));
    std::string kv;
    while (f >> kv) {
      auto eq = kv.find('=');
      std::string k = kv.substr(0, eq), val = kv.substr(eq + 1);
      if (k == "role")
        t.role = val;
      else if (k == "tid")
        t.tid = static_cast<uint32_t>(std::stoul(val));
      else if (auto it = kFields.find(k); it != kFields.end())
        t.*(it->second) = std::stoull(val);
    }
    v.push_back(t);
  }
  return v;
}

std::string Unwrapped(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n') {
      out += text[i];
      continue;
    }
    while (i + 1 < text.size() && text[i + 1] == ' ')
      ++i;
    out += ' ';
  }
  return out;
}

}  // namespace parmon::testing
