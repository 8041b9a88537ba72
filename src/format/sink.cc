#include "format/sink.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace parmon::format {
namespace {

class FdSink : public ChunkSink {
 public:
  FdSink(int fd, std::string name, bool owns_fd) : fd_(fd), name_(std::move(name)), owns_(owns_fd) {
    struct stat st;
    socket_ = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
  }
  ~FdSink() override {
    if (owns_ && fd_ >= 0)
      close(fd_);
  }

  Status Write(const iovec* iov, int count, size_t* written) override {
    *written = 0;
    if (fd_ < 0)
      return Status::Error(fmt::format("{} is closed", name_));
    std::vector<iovec> v(iov, iov + count);
    size_t total = 0;
    for (const auto& e : v)
      total += e.iov_len;
    size_t first = 0;  // first iovec with bytes left
    while (*written < total) {
      ssize_t n;
      if (socket_) {
        // A peer that went away is an error to report, not a SIGPIPE that kills the writer.
        msghdr m{};
        m.msg_iov = v.data() + first;
        m.msg_iovlen = v.size() - first;
        n = sendmsg(fd_, &m, MSG_NOSIGNAL);
      } else {
        n = writev(fd_, v.data() + first, static_cast<int>(v.size() - first));
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return Status::Error(
            fmt::format("writing {} failed: {}", name_, strerror(n < 0 ? errno : EIO)));
      *written += static_cast<size_t>(n);
      size_t skip = static_cast<size_t>(n);
      while (first < v.size() && skip >= v[first].iov_len)
        skip -= v[first++].iov_len;
      if (first < v.size()) {
        v[first].iov_base = static_cast<uint8_t*>(v[first].iov_base) + skip;
        v[first].iov_len -= skip;
      }
    }
    return Status::Ok();
  }

  bool Truncate(uint64_t length) override {
    return fd_ >= 0 && ftruncate(fd_, static_cast<off_t>(length)) == 0;
  }

  Reservation Reserve(uint64_t length) override {
    if (fd_ < 0 || socket_ || reserve_unsupported_)
      return Reservation::kUnsupported;
    // KEEP_SIZE: the blocks are allocated but the file's size (what readers see) does not move.
    if (fallocate(fd_, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(length)) == 0) {
      reserved_ = std::max(reserved_, length);
      return Reservation::kReserved;
    }
    if (errno == ENOSPC || errno == EDQUOT)
      return Reservation::kNoSpace;
    reserve_unsupported_ = true;  // a pipe (ESPIPE), a file system without fallocate
    return Reservation::kUnsupported;
  }

  void ReleaseReserve(uint64_t length) override {
    if (fd_ >= 0 && reserved_ > length) {
      fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(length),
                static_cast<off_t>(reserved_ - length));
      // ext4 punches nothing past the end of the file, where KEEP_SIZE put the reserve: a
      // truncation to the file's own size frees those blocks (1 MiB left allocated per file
      // otherwise: 4 GiB for a session of 4,096 rank files).
      struct stat st;
      if (fstat(fd_, &st) == 0 && S_ISREG(st.st_mode))
        (void)ftruncate(fd_, st.st_size);
    }
    reserved_ = 0;
  }

  Status Close() override {
    if (fd_ < 0 || !owns_) {
      fd_ = -1;
      return Status::Ok();
    }
    int fd = fd_;
    fd_ = -1;
    if (close(fd) != 0)
      return Status::Error(fmt::format("closing {} failed: {}", name_, strerror(errno)));
    return Status::Ok();
  }

  const std::string& name() const override { return name_; }

 private:
  int fd_;
  std::string name_;
  bool owns_;
  bool socket_ = false;
  bool reserve_unsupported_ = false;
  uint64_t reserved_ = 0;  // bytes allocated from the start of the file
};

}  // namespace

StatusOr<std::unique_ptr<ChunkSink>> OpenFileSink(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::Error(fmt::format("cannot create trace file {}: {}", path, strerror(errno)));
  return std::unique_ptr<ChunkSink>(new FdSink(fd, path, true));
}

std::unique_ptr<ChunkSink> MakeFdSink(int fd, std::string name, bool owns_fd) {
  return std::make_unique<FdSink>(fd, std::move(name), owns_fd);
}

}  // namespace parmon::format
