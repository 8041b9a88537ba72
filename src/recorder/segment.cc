#include "recorder/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include <fmt/format.h>

namespace parmon::recorder {

int Segment::RemoveStale(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr)
    return 0;
  int removed = 0;
  while (dirent* e = readdir(d)) {
    // parmon-<pid>-<8 hex digits>, as Create names them.
    unsigned long pid = 0;
    char hex[9] = {};
    int end = 0;
    if (sscanf(e->d_name, "parmon-%lu-%8[0-9a-f]%n", &pid, hex, &end) != 2 ||
        e->d_name[end] != '\0' || strlen(hex) != 8 || pid == 0 || pid > INT32_MAX)
      continue;
    // Only a pid that is no process at all: a live one (even reused) may still be a recorder.
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
      continue;
    removed += unlinkat(dirfd(d), e->d_name, 0) == 0;
  }
  closedir(d);
  return removed;
}

StatusOr<std::unique_ptr<Segment>> Segment::Create(const SegmentOptions& options) {
  RemoveStale();
  uint64_t slots = 1;
  while (slots * sizeof(shm::Slot) < options.ring_bytes)
    slots <<= 1;
  if (slots < 2 * shm::kMaxEventSlots)
    slots = 1;
  while (slots < 2 * shm::kMaxEventSlots)
    slots <<= 1;
  // The header, the control page, then the self-monitoring table (whole pages each).
  const uint64_t monitor_offset = 4096 + sizeof(shm::ControlPage);
  const uint64_t header_bytes = monitor_offset + sizeof(shm::MonitorTable);
  const uint64_t controls_bytes =
      (uint64_t{options.ring_count} * sizeof(shm::RingControl) + 4095) / 4096 * 4096;
  const uint64_t ring_bytes = slots * sizeof(shm::Slot);
  const uint64_t size = header_bytes + controls_bytes + ring_bytes * options.ring_count;

  auto seg = std::unique_ptr<Segment>(new Segment());
  std::random_device rd;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    seg->name_ = fmt::format("parmon-{}-{:08x}", getpid(), rd());
    fd = shm_open(("/" + seg->name_).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd < 0)
    return Status::Error(
        fmt::format("cannot create shared memory in /dev/shm: {}", strerror(errno)));
  // The file is sparse: only ring pages that threads touch take memory.
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(("/" + seg->name_).c_str());
    return Status::Error(
        fmt::format("cannot size shared memory to {} MB: {}", size >> 20, strerror(err)));
  }
  void* map = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    shm_unlink(("/" + seg->name_).c_str());
    return Status::Error(fmt::format("cannot map shared memory: {}", strerror(errno)));
  }
  seg->size_ = size;
  auto* h = new (map) shm::SegmentHeader();
  h->abi_version = shm::kAbiVersion;
  h->ring_count = options.ring_count;
  h->segment_size = size;
  h->ring_slots = slots;
  h->rings_offset = header_bytes;
  h->overflow = static_cast<uint32_t>(options.overflow);
  h->ticks_are_tsc = options.ticks_are_tsc ? 1 : 0;
  h->recorder_pid = static_cast<uint32_t>(getpid());
  h->session_state.store(shm::kRecording, std::memory_order_relaxed);
  h->next_string_id.store(options.first_string_id, std::memory_order_relaxed);
  h->run_mode = static_cast<uint32_t>(options.run_mode);
  h->period_ns = options.period_ns;
  h->control_offset = 4096;
  h->monitor_offset = monitor_offset;
  auto* monitor = new (shm::Monitor(h)) shm::MonitorTable();
  monitor->entry_count = shm::kMonitorEntries;
  auto* control = new (shm::Control(h)) shm::ControlPage();
  control->enabled.store(1, std::memory_order_relaxed);
  control->period_ns.store(options.period_ns, std::memory_order_relaxed);
  auto* rings = shm::Rings(h);
  for (uint32_t i = 0; i < options.ring_count; ++i) {
    auto* r = new (&rings[i]) shm::RingControl();
    r->head.store(0, std::memory_order_relaxed);
    r->tail.store(0, std::memory_order_relaxed);
    r->state.store(shm::kFree, std::memory_order_relaxed);
    r->data_offset = header_bytes + controls_bytes + ring_bytes * i;
  }
  // The magic last, with release: a program that sees it sees an initialised segment.
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = shm::kSegmentMagic;
  seg->header_ = h;
  return seg;
}

void Segment::Unlink() {
  if (!unlinked_ && !name_.empty())
    shm_unlink(("/" + name_).c_str());
  unlinked_ = true;
}

Segment::~Segment() {
  Unlink();
  if (header_)
    munmap(header_, size_);
}

}  // namespace parmon::recorder
