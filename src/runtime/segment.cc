// libparmon: mapping the recorder's shared segment, named by the environment, and its control
// page (shm::ControlPage) over the enabled flag of runtime.cc. The checks that the segment is
// whole and speaks this library's ABI live here; runtime.cc publishes it. Also the preload
// families' view of the session's mode and period.
#include <fcntl.h>
#include <linux/limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/emit.h"
#include "runtime/internal.h"

namespace parmon::runtime {

using shm::SegmentHeader;

SegmentHeader* MapSegment() {
  const char* name = getenv(shm::kEnvSegment);
  if (name == nullptr || *name == '\0')
    return nullptr;
  char path[PATH_MAX];
  if (std::strlen(name) + 10 >= sizeof path)
    return nullptr;
  std::strcpy(path, "/dev/shm/");
  std::strcat(path, name);
  long fd = RawOpen(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return nullptr;  // the recorder is gone: run unrecorded
  struct stat st;
  if (fstat(static_cast<int>(fd), &st) != 0 ||
      st.st_size < static_cast<off_t>(sizeof(SegmentHeader))) {
    syscall(SYS_close, fd);
    return nullptr;
  }
  void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED,
                   static_cast<int>(fd), 0);
  syscall(SYS_close, fd);
  if (map == MAP_FAILED)
    return nullptr;
  auto* seg = static_cast<SegmentHeader*>(map);
  if (seg->magic == shm::kSegmentMagic && seg->abi_version != shm::kAbiVersion) {
    // A parmon of another version started this program: say so rather than record nothing
    // without a word (the recorder then reports no events from this process).
    char msg[160];
    int n = snprintf(msg, sizeof msg,
                     "parmon: this libparmon speaks shared-memory ABI %u but the recorder "
                     "speaks ABI %u; process %d is not recorded\n",
                     shm::kAbiVersion, seg->abi_version, static_cast<int>(getpid()));
    if (n > 0)
      syscall(SYS_write, 2, msg, static_cast<size_t>(n) < sizeof msg ? n : sizeof msg - 1);
  }
  if (seg->magic != shm::kSegmentMagic || seg->abi_version != shm::kAbiVersion ||
      seg->segment_size != static_cast<uint64_t>(st.st_size) || seg->control_offset % 4096 != 0 ||
      seg->control_offset + sizeof(shm::ControlPage) > seg->rings_offset ||
      seg->monitor_offset % 4096 != 0 ||
      seg->monitor_offset + sizeof(shm::MonitorTable) > seg->rings_offset ||
      shm::Monitor(seg)->entry_count > shm::kMonitorEntries) {
    munmap(map, static_cast<size_t>(st.st_size));
    return nullptr;
  }
  return seg;
}

// Both through syscall(), not libc's wrappers: an MPI library may interpose mremap/mmap with
// memory hooks that do not pass mremap's fifth argument on (MPICH's ranks got new_address 0x1,
// EINVAL, and recorded nothing).
bool ShareControlPage(SegmentHeader* seg, shm::ControlPage* at) {
  // mremap with old size 0 makes a second mapping of a shared mapping's pages.
  const long got =
      syscall(SYS_mremap, static_cast<void*>(shm::Control(seg)), 0ul, sizeof(shm::ControlPage),
              MREMAP_MAYMOVE | MREMAP_FIXED, static_cast<void*>(at));
  return got == reinterpret_cast<long>(at);
}

void PrivateControlPage(shm::ControlPage* at) {
  syscall(SYS_mmap, static_cast<void*>(at), sizeof(shm::ControlPage), PROT_READ | PROT_WRITE,
          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0l);
}

}  // namespace parmon::runtime

using parmon::runtime::CurrentSegment;

extern "C" __attribute__((visibility("default"))) int parmon_x_session_mode(uint32_t* mode,
                                                                            uint64_t* period_ns) {
  parmon::shm::SegmentHeader* seg = CurrentSegment();
  if (seg == nullptr)
    return 0;
  *mode = seg->run_mode;
  *period_ns = parmon::shm::Control(seg)->period_ns.load(std::memory_order_relaxed);
  return 1;
}

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
              sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
extern "C" __attribute__((visibility("default"))) const uint64_t* parmon_x_period_flag(void) {
  parmon::shm::SegmentHeader* seg = CurrentSegment();
  if (seg == nullptr)
    return nullptr;
  return reinterpret_cast<const uint64_t*>(&parmon::shm::Control(seg)->period_ns);
}
