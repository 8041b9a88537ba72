#include "live/live_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "support/e2e.h"

namespace parmon::testing {

bool WaitFor(const std::function<bool()>& cond, double timeout_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (cond())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

Process::Process(const std::vector<std::string>& argv,
                 const std::string& out_path,
                 const std::string& err_path)
    : out_(out_path), err_(err_path) {
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);  // its own group: Kill reaches the program under it too
    int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> args;
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
}

Process::~Process() {
  if (Running()) {
    Kill(SIGKILL);
    Wait(10);
  }
}

int Process::Wait(double timeout_s) {
  WaitFor([&] { return !Running(); }, timeout_s);
  if (!reaped_)
    return -1;
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
}

void Process::Kill(int sig) {
  if (!reaped_)
    kill(-pid_, sig);
}

bool Process::Running() {
  if (reaped_)
    return false;
  if (waitpid(pid_, &status_, WNOHANG) == pid_)
    reaped_ = true;
  return !reaped_;
}

std::string Process::Out() const {
  return ReadFile(out_);
}
std::string Process::Err() const {
  return ReadFile(err_);
}

Collector::Collector(const std::string& store,
                     const std::string& log,
                     const std::vector<std::string>& extra,
                     int port) {
  std::vector<std::string> argv = {
      ParmonBin(), "serve", "--listen", "127.0.0.1:" + std::to_string(port), "--store", store};
  argv.insert(argv.end(), extra.begin(), extra.end());
  proc_ = std::make_unique<Process>(argv, log + ".out", log);
  WaitFor([&] { return proc_->Out().find('\n') != std::string::npos || !proc_->Running(); }, 30);
  port_ = atoi(proc_->Out().c_str());
}

std::string Collector::Addr() const {
  return "127.0.0.1:" + std::to_string(port_);
}

int ConnectTo(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool ReadUntilClosed(int fd, double timeout_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) > 0) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0)
        return true;
    }
  }
  return false;
}

Relay::Relay(int upstream) : upstream_(upstream) {
  Listen();
  thread_ = std::thread([this] { Loop(); });
}

Relay::~Relay() {
  stop_ = true;
  thread_.join();
  Cut();
}

void Relay::Listen() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port_));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  listen(listen_fd_, 16);
  socklen_t len = sizeof a;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
}

// Test code only: one poll loop moving bytes both ways for every relayed connection.
void Relay::Loop() {
  while (!stop_) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!cut_ && listen_fd_ >= 0) {
        PollOnce();
        continue;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Relay::PollOnce() {
  char buf[65536];
  {
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
    for (auto& [a, b] : pairs_) {
      fds.push_back({a, POLLIN, 0});
      fds.push_back({b, POLLIN, 0});
    }
    if (poll(fds.data(), fds.size(), 10) <= 0)
      return;
    if (fds[0].revents & POLLIN) {
      int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      int u = c >= 0 ? ConnectTo(upstream_) : -1;
      if (u >= 0)
        pairs_.emplace_back(c, u);
      else if (c >= 0)
        close(c);
    }
    std::vector<size_t> dead;
    for (size_t i = 0; i < (fds.size() - 1) / 2; ++i) {
      bool closed = false;
      for (int side = 0; side < 2 && !closed; ++side) {
        const pollfd& p = fds[1 + 2 * i + side];
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
          continue;
        int from = side ? pairs_[i].second : pairs_[i].first;
        int to = side ? pairs_[i].first : pairs_[i].second;
        ssize_t n = read(from, buf, sizeof buf);
        if (n <= 0 || send(to, buf, n, MSG_NOSIGNAL) != n)
          closed = true;
      }
      if (closed)
        dead.push_back(i);
    }
    for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
      close(pairs_[*it].first);
      close(pairs_[*it].second);
      pairs_.erase(pairs_.begin() + static_cast<long>(*it));
    }
  }
}

void Relay::Cut() {
  std::lock_guard<std::mutex> lock(mu_);
  cut_ = true;
  for (auto& [a, b] : pairs_) {
    close(a);
    close(b);
  }
  pairs_.clear();
  if (listen_fd_ >= 0)
    close(listen_fd_);
  listen_fd_ = -1;
}

void Relay::Restore() {
  std::lock_guard<std::mutex> lock(mu_);
  Listen();
  cut_ = false;
}

long RssKib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return atol(line.c_str() + 6);
  return 0;
}

uint64_t SizeOf(const std::string& path) {
  std::error_code ec;
  auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : n;
}

std::unique_ptr<Process> Record(const TempDir& dir,
                                const std::string& name,
                                const std::string& to,
                                const std::vector<std::string>& program,
                                const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {ParmonBin(), "record", "-q", "--to", to};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  return std::make_unique<Process>(argv, dir.File(name + ".out"), dir.File(name + ".err"));
}

}  // namespace parmon::testing
