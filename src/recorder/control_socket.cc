// The recorder's local control socket and its client (control_socket.h).
#include "recorder/control_socket.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "base/clock.h"

namespace parmon::recorder {

namespace {

constexpr size_t kMaxLine = 4096;
constexpr int kClientLineMs = 2000;

// Reads up to a newline (or EOF) within deadline_ms; false on timeout, error or an overlong line.
bool ReadLine(int fd, int deadline_ms, std::string* line) {
  const uint64_t end = MonotonicNs() + static_cast<uint64_t>(deadline_ms) * 1'000'000;
  char buf[512];
  for (;;) {
    const uint64_t now = MonotonicNs();
    if (now >= end)
      return false;
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>((end - now) / 1'000'000) + 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return false;
    if (n == 0)
      return !line->empty();
    line->append(buf, static_cast<size_t>(n));
    if (size_t nl = line->find('\n'); nl != std::string::npos) {
      line->resize(nl);
      return true;
    }
    if (line->size() > kMaxLine)
      return false;
  }
}

bool WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// The directory exists, is ours, is not a symlink and only we can enter it.
Status EnsurePrivateDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Status::Error(
        fmt::format("cannot create the control directory {}: {}", dir, strerror(errno)));
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
      (st.st_mode & 0077) != 0)
    return Status::Error(fmt::format(
        "the control directory {} is not a private directory of this user (mode 0700)", dir));
  return Status::Ok();
}

}  // namespace

std::string ControlSocketDir() {
  const char* xdg = getenv("XDG_RUNTIME_DIR");
  struct stat st;
  if (xdg != nullptr && *xdg == '/' && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) &&
      st.st_uid == getuid())
    return std::string(xdg) + "/parmon";
  return fmt::format("/tmp/parmon-{}", getuid());
}

std::string ControlSocketPath(pid_t pid) {
  return fmt::format("{}/{}.ctl", ControlSocketDir(), pid);
}

StatusOr<std::unique_ptr<ControlSocket>> ControlSocket::Start(Handler handler) {
  auto s = std::unique_ptr<ControlSocket>(new ControlSocket());
  s->handler_ = std::move(handler);
  const std::string dir = ControlSocketDir();
  PARMON_RETURN_IF_ERROR(EnsurePrivateDir(dir));
  s->path_ = ControlSocketPath(getpid());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (s->path_.size() >= sizeof addr.sun_path)
    return Status::Error(fmt::format("the control socket path {} is too long", s->path_));
  std::memcpy(addr.sun_path, s->path_.c_str(), s->path_.size() + 1);
  s->listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0)
    return Status::Error(fmt::format("cannot create the control socket: {}", strerror(errno)));
  unlink(s->path_.c_str());  // a socket left by an earlier process with our pid
  if (bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(s->path_.c_str(), 0600) != 0 || listen(s->listen_fd_, 8) != 0) {
    int err = errno;
    s->path_.clear();  // not ours to remove
    return Status::Error(fmt::format("cannot listen on the control socket {}: {}",
                                     ControlSocketPath(getpid()), strerror(err)));
  }
  s->stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (s->stop_fd_ < 0)
    return Status::Error(fmt::format("cannot create an eventfd: {}", strerror(errno)));
  s->thread_ = std::thread([p = s.get()] { p->Serve(); });
  return s;
}

ControlSocket::~ControlSocket() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  if (!path_.empty())
    unlink(path_.c_str());
  if (listen_fd_ >= 0)
    close(listen_fd_);
  if (stop_fd_ >= 0)
    close(stop_fd_);
}

void ControlSocket::Serve() {
  // The recorder forwards signals to the command through a signalfd: keep them blocked here too.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    int r = poll(p, 2, -1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 || (p[1].revents & POLLIN))
      return;
    if (p[0].revents & POLLIN) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        ServeOne(fd);
        close(fd);
      }
    }
  }
}

void ControlSocket::ServeOne(int fd) {
  std::string line;
  if (!ReadLine(fd, kClientLineMs, &line)) {
    WriteAll(fd, "error: no command line of at most 4096 bytes within 2 s\n");
    return;
  }
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
  std::string reply = handler_(line);
  // One line: a reply never carries a newline of its own.
  for (char& c : reply)
    if (c == '\n' || c == '\r')
      c = ' ';
  WriteAll(fd, reply + "\n");
}

StatusOr<std::string> SendControlCommand(const std::string& path,
                                         const std::string& command,
                                         int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    return Status::Error(fmt::format("the control socket path {} is too long", path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return Status::Error(fmt::format("cannot create a socket: {}", strerror(errno)));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    close(fd);
    if (err == ENOENT || err == ECONNREFUSED)
      return Status::Error(fmt::format(
          "no recorder listens on {} (it has ended, or never ran; parmon ctl --list shows the "
          "live ones)",
          path));
    return Status::Error(fmt::format("cannot connect to {}: {}", path, strerror(err)));
  }
  std::string line = command + "\n";
  std::string reply;
  bool ok = WriteAll(fd, line) && ReadLine(fd, timeout_ms, &reply);
  close(fd);
  if (!ok)
    return Status::Error(
        fmt::format("the recorder at {} did not answer within {} ms", path, timeout_ms));
  return reply;
}

std::vector<LocalRecorder> ListLocalRecorders() {
  std::vector<LocalRecorder> out;
  const std::string dir = ControlSocketDir();
  DIR* d = opendir(dir.c_str());
  if (d == nullptr)
    return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".ctl") != 0)
      continue;
    char* end = nullptr;
    long pid = strtol(name.c_str(), &end, 10);
    if (pid <= 0 || end != name.c_str() + name.size() - 4)
      continue;
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      continue;  // stale: the recorder died without removing it
    LocalRecorder r;
    r.pid = static_cast<pid_t>(pid);
    r.socket = dir + "/" + name;
    if (FILE* f = fopen(fmt::format("/proc/{}/cmdline", pid).c_str(), "r")) {
      char buf[512];
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      for (size_t i = 0; i < n; ++i)
        if (buf[i] == '\0')
          buf[i] = ' ';
      r.command.assign(buf, n);
      while (!r.command.empty() && r.command.back() == ' ')
        r.command.pop_back();
    }
    out.push_back(std::move(r));
  }
  closedir(d);
  std::sort(out.begin(), out.end(),
            [](const LocalRecorder& a, const LocalRecorder& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace parmon::recorder
