#include "format/input.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "format/chunk.h"

namespace parmon::format {
namespace {

// A FIFO opened without O_NONBLOCK blocks in open() until a writer comes, silently. Opened
// non-blocking it returns at once, and poll() reports nothing until a writer has written or come
// and gone; after a short grace period we say what we are waiting for, then wait.
Status WaitForFifoWriter(int fd, const std::string& path) {
  pollfd pfd{fd, POLLIN, 0};
  int n;
  while ((n = poll(&pfd, 1, 200)) < 0 && errno == EINTR) {
  }
  if (n == 0) {
    fmt::print(stderr, "parmon: waiting for a writer on FIFO {} (Ctrl-C to stop)\n", path);
    std::fflush(stderr);
    while ((n = poll(&pfd, 1, -1)) < 0 && errno == EINTR) {
    }
  }
  if (n < 0)
    return Status::Error(
        fmt::format("cannot wait for a writer on FIFO {}: {}", path, strerror(errno)));
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
    return Status::Error(fmt::format("cannot read FIFO {}: {}", path, strerror(errno)));
  return Status::Ok();
}

int OpenTempFile() {
  const char* dir = getenv("TMPDIR");
  for (const char* d : {dir, "/tmp"}) {
    if (d == nullptr || *d == '\0')
      continue;
    int fd = open(d, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
      return fd;
    // File systems without O_TMPFILE: a named file, unlinked at once.
    std::string tmpl = std::string(d) + "/parmon-stream-XXXXXX";
    fd = mkostemp(tmpl.data(), O_CLOEXEC);
    if (fd >= 0) {
      unlink(tmpl.c_str());
      return fd;
    }
  }
  return -1;
}

}  // namespace

StatusOr<int> OpenTraceInput(const std::string& path) {
  if (path == "-") {
    int fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
      return Status::Error(fmt::format("cannot read standard input: {}", strerror(errno)));
    return fd;
  }
  struct stat st;
  const bool fifo = stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | (fifo ? O_NONBLOCK : 0));
  if (fd < 0)
    return Status::Error(fmt::format("cannot open {}: {}", path, strerror(errno)));
  if (fifo) {
    Status s = WaitForFifoWriter(fd, path);
    if (!s.ok()) {
      close(fd);
      return s;
    }
  }
  return fd;
}

StatusOr<int> SpoolToTempFile(int in_fd, const std::string& name, uint64_t* size) {
  int out = OpenTempFile();
  if (out < 0)
    return Status::Error(fmt::format(
        "cannot create a temporary file to hold {} (set TMPDIR to a writable directory): {}", name,
        strerror(errno)));
  std::vector<char> buf(1 << 20);
  std::string head;  // the first bytes, to check the signature
  *size = 0;
  for (;;) {
    ssize_t n = read(in_fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int err = errno;
      close(out);
      return Status::Error(fmt::format("cannot read {}: {}", name, strerror(err)));
    }
    if (n == 0)
      break;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = write(out, buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0) {
        int err = w < 0 ? errno : EIO;
        close(out);
        return Status::Error(
            fmt::format("cannot hold {} in a temporary file: {}", name, strerror(err)));
      }
      done += w;
    }
    *size += static_cast<uint64_t>(n);
    // Input that does not start like a trace (/dev/zero, /dev/urandom, a log) is not copied to
    // its end, which may never come: what is here is enough for the caller's "not a trace".
    if (head.size() < sizeof kFileMagic) {
      head.append(buf.data(), std::min(static_cast<size_t>(n), sizeof kFileMagic - head.size()));
      if (head.size() == sizeof kFileMagic &&
          std::memcmp(head.data(), kFileMagic, head.size()) != 0)
        break;
    }
  }
  return out;
}

}  // namespace parmon::format
