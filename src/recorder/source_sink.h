// The narrow interface between the recorder's event sources (the /proc sampler, the
// context-switch recorder, any later one) and whatever collects their events.
//
// Sources see only this: the session clock, the command they watch, locations to define, and
// streams to append to. The Recorder implements it for `parmon record`; a test (or a future
// live collector) implements it with a few containers, so a source can run without shared memory,
// a trace file or a child process.
#ifndef PARMON_SRC_RECORDER_SOURCE_SINK_H_
#define PARMON_SRC_RECORDER_SOURCE_SINK_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "format/codec.h"
#include "runtime/shm_abi.h"

namespace parmon::recorder {

class SourceSink {
 public:
  virtual ~SourceSink() = default;
  // The session clock every event's ts is on.
  virtual const TickConversion& clock() const = 0;
  // The command's process (or the process followed with -p); -1 before it exists.
  virtual pid_t child_pid() const = 0;
  // True when following a process the recorder did not start (-p PID).
  virtual bool attached() const = 0;
  // The location of a thread / a CPU, defined in the session on first use.
  virtual uint32_t ThreadLocation(uint32_t pid, uint32_t tid) = 0;
  virtual uint32_t CpuLocation(uint32_t cpu) = 0;
  // Appends an event to the (location, source) stream; e.location/e.source are taken from args.
  virtual void Append(uint32_t location, format::Source source, const format::Event& e) = 0;
  // Appends a definition event (DefString, DefLocation, DefProcess).
  virtual void AppendDefinition(const format::Event& e) = 0;
  // Processes known to be part of the session: pid -> ppid.
  virtual const std::map<uint32_t, uint32_t>& processes() const = 0;
  virtual void NoteProcess(uint32_t pid, uint32_t ppid, const std::string& command) = 0;
  // The kernel's name of a thread was `name` at session time ts (after an exec or a prctl): its
  // location takes it, unless it already has a name from later.
  virtual void RenameThread(uint32_t /*pid*/,
                            uint32_t /*tid*/,
                            const std::string& /*name*/,
                            uint64_t /*ts*/) {}
  // The session's self-monitoring table in shared memory (docs/selfmon.md), which the sampler
  // publishes watched threads' figures into; null without a segment (tests).
  virtual shm::MonitorTable* monitor_table() { return nullptr; }
  // The session's segment, whose ring controls carry each thread's MPI time (RingControl::
  // mpi_ticks) for the same figures; null without a segment (tests).
  virtual const shm::SegmentHeader* segment_header() { return nullptr; }
  // A key/value for the session's END record (a source's totals).
  virtual void AddEndValue(std::string key, std::string value) = 0;
};

// Something that adds events of its own to the session (sampler, context switches, ...).
class RecorderSource {
 public:
  virtual ~RecorderSource() = default;
  virtual const char* name() const = 0;
  // Between fork and the command's exec (the child waits meanwhile), so a source can attach to
  // the process from its first instruction. Not called when attaching to a running process.
  virtual Status ChildCreated(SourceSink&, pid_t) { return Status::Ok(); }
  // After the command started (its pid is SourceSink::child_pid()).
  virtual Status Start(SourceSink& sink) = 0;
  // From the recorder's loop, every iteration (at least every window).
  virtual void Poll(SourceSink& sink, uint64_t now_ns) = 0;
  // `parmon ctl period`: the aggregation period changed (periodic mode), from the loop's thread.
  virtual void SetPeriod(uint64_t /*period_ns*/) {}
  // Before the file is closed: a last poll and flush.
  virtual void Stop(SourceSink& sink) = 0;
};

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_SOURCE_SINK_H_
