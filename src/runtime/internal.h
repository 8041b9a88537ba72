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

// Writes the DefString event naming id in category; it is delivered even while recording is
// paused, since later events refer to the id (runtime.cc).
void EmitDefString(uint32_t id, uint64_t category, const char* name);

// The id of (name, category) in this process, emitting its DefString the first time (intern.cc).
uint32_t Intern(const char* name, uint32_t category);

// Maps and checks the segment the recorder named in the environment; null when there is none or
// it does not match this library's ABI (segment.cc).
shm::SegmentHeader* MapSegment();

// Maps seg's control page at `at` (a page-aligned page of libparmon's own), so that what the
// recorder writes there is read in place; false when the kernel refused (segment.cc).
bool ShareControlPage(shm::SegmentHeader* seg, shm::ControlPage* at);
// Puts a private zero page at `at` (parmon_pause(): this process alone stops recording).
void PrivateControlPage(shm::ControlPage* at);

// Records the signals that end the process (FatalSignal events): installs a handler over the
// default action of each, and, with over_handlers, over a handler set since (an MPI library's),
// which it then chains to (fatal_signals.cc).
void WatchFatalSignals(bool over_handlers);

}  // namespace parmon::runtime
