// Declarations shared by libparmon's source files (all hidden: the library exports only the C
// API of parmon/parmon.h). runtime.cc keeps the hot path and the rings; intern.cc the table of
// interned names; segment.cc maps the recorder's shared segment.
#pragma once

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "runtime/shm_abi.h"

namespace parmon::runtime {

// open() straight to the kernel: parmon's own I/O wrappers never see the runtime's files.
inline long RawOpen(const char* path, int flags) {
  return syscall(SYS_openat, AT_FDCWD, path, flags, 0);
}

// The mapped segment, or null while not recording (runtime.cc).
shm::SegmentHeader* CurrentSegment();

// Writes a general event; returns a PARMON_* code (runtime.cc).
int EmitGeneral(uint64_t ticks,
                bool have_ticks,
                uint16_t kind,
                const uint64_t* args,
                unsigned nargs,
                const void* payload,
                uint32_t size,
                bool must_deliver);

// The id of (name, category) in this process, emitting its DefString the first time (intern.cc).
uint32_t Intern(const char* name, uint32_t category);

// Maps and checks the segment the recorder named in the environment; null when there is none or
// it does not match this library's ABI (segment.cc).
shm::SegmentHeader* MapSegment();

}  // namespace parmon::runtime
