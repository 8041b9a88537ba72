// The event kinds of the trace format: one table, used by the runtime (ring records), the
// recorder (encoding), the reader (decoding) and `parmon dump` (names). The file also carries this
// table in its SCHEMA chunk, so a reader can skip a kind it does not know.
//
// Columns: X(Name, id, number of u64 args, has a byte payload, mask of args that are times,
//            "comma-separated arg names")
// Times in args are TSC ticks in the ring and nanoseconds of the session clock in the file (the
// recorder converts the args named by the mask). Ids are stable: never renumber, only add.
//
// Id ranges: 1-15 definitions, 16-63 program runtime, 64-127 communication (MPI, POSIX channels,
// pthread sync), 128-191 scheduling (sampler, context switches), 192-255 recorder and clock.
#ifndef PARMON_SRC_FORMAT_KINDS_H_
#define PARMON_SRC_FORMAT_KINDS_H_

#include <cstdint>
#include <iterator>

#define PARMON_EVENT_KINDS(X)                                                            \
  /* definitions */                                                                      \
  X(DefString, 1, 2, true, 0, "id,category")                                             \
  X(DefLocation, 2, 4, true, 0, "location,type,pid,tid")                                 \
  X(DefProcess, 3, 2, true, 0, "pid,ppid")                                               \
  /* program runtime */                                                                  \
  X(RegionEnter, 16, 1, false, 0, "region")                                              \
  X(RegionLeave, 17, 1, false, 0, "region")                                              \
  X(TraceEvent, 18, 1, false, 0, "event")                                                \
  X(TraceData, 19, 1, true, 0, "event")                                                  \
  X(CounterInt, 20, 2, false, 0, "counter,value")                                        \
  X(CounterDouble, 21, 2, false, 0, "counter,value_bits")                                \
  X(Marker, 22, 1, false, 0, "marker")                                                   \
  X(ThreadName, 23, 0, true, 0, "")                                                      \
  X(ProcessName, 24, 0, true, 0, "")                                                     \
  X(Pause, 25, 0, false, 0, "")                                                          \
  X(Resume, 26, 0, false, 0, "")                                                         \
  X(Lost, 27, 2, false, 0x2, "count,first_time")                                         \
  X(ThreadBegin, 28, 0, false, 0, "")                                                    \
  X(ThreadEnd, 29, 0, false, 0, "")                                                      \
  X(ProcessBegin, 30, 2, true, 0, "pid,ppid")                                            \
  X(Fork, 31, 1, false, 0, "child_pid")                                                  \
  X(Exec, 32, 0, true, 0, "")                                                            \
  X(ProcessExit, 33, 1, false, 0, "status")                                              \
  /* OpenMP through OMPT (src/omp, docs/openmp.md) */                                    \
  X(OmpRuntime, 34, 2, true, 0, "ompt,version")                                          \
  X(OmpThread, 35, 2, false, 0, "type,endpoint")                                         \
  X(OmpParallel, 36, 4, false, 0x8, "region,team_size,construct,begin")                  \
  X(OmpImplicitTask, 37, 4, false, 0x8, "region,index,team_size,begin")                  \
  X(OmpSyncWait, 38, 3, false, 0x4, "region,kind,begin")                                 \
  X(OmpWork, 39, 4, false, 0x8, "region,wstype,count,begin")                             \
  X(OmpMutexWait, 40, 3, false, 0x4, "kind,wait_id,begin")                               \
  X(OmpTask, 41, 2, false, 0x2, "region,begin")                                          \
  X(OmpSoloRegion, 42, 3, false, 0x4, "region,construct,begin")                          \
  /* a signal about to end the process (runtime/fatal_signals.cc) */                     \
  X(FatalSignal, 43, 3, false, 0, "signal,code,sender")                                  \
  /* parmon_matrix: one part of one step of a matrix (format/matrix.h) */                \
  X(MatrixData, 44, 6, true, 0, "matrix,type,rows,cols,step,offset")                     \
  /* communication (64-127): MPI, POSIX channels, pthread sync -- see docs/events.md */  \
  X(MpiInit, 64, 3, false, 0, "rank,size,thread_level")                                  \
  X(MpiEnter, 65, 2, false, 0, "func,site")                                              \
  X(MpiLeave, 66, 1, false, 0, "func")                                                   \
  X(MpiSend, 67, 5, false, 0, "peer,tag,comm,bytes,request")                             \
  X(MpiRecv, 68, 6, false, 0x20, "peer,tag,comm,bytes,request,posted")                   \
  X(MpiRequestDone, 69, 2, false, 0x2, "request,posted")                                 \
  X(MpiCollective, 70, 6, false, 0, "func,comm,root,bytes_sent,bytes_recv,request")      \
  X(MpiCommDef, 71, 3, true, 0, "comm,size,flags")                                       \
  X(MpiClockSync, 72, 4, false, 0xc, "peer,epoch,t_send,t_recv")                         \
  X(MpiRma, 73, 4, false, 0, "func,peer,win,bytes")                                      \
  X(MpiIo, 74, 3, false, 0, "func,file,bytes")                                           \
  X(MpiError, 75, 2, false, 0, "func,code")                                              \
  X(MpiStats, 76, 4, false, 0, "func,calls,busy_ns,bytes")                               \
  X(MpiPeerStats, 77, 3, false, 0, "peer,messages,bytes")                                \
  X(ChanInfo, 96, 4, true, 0, "fd,type,local_id,peer_id")                                \
  X(ChanRead, 97, 4, false, 0x4, "fd,bytes,begin,func")                                  \
  X(ChanWrite, 98, 4, false, 0x4, "fd,bytes,begin,func")                                 \
  X(ChanWait, 99, 4, false, 0x8, "func,nfds,ready,begin")                                \
  X(ChanClose, 100, 1, false, 0, "fd")                                                   \
  X(SyncWait, 101, 4, false, 0x4, "object,type,begin,result")                            \
  X(SyncSignal, 102, 2, false, 0, "object,type")                                         \
  X(TimerWait, 103, 3, false, 0x4, "func,requested_ns,begin")                            \
  /* scheduling (128-191): context switches, /proc sampler -- see docs/events.md */      \
  X(SwitchIn, 128, 1, false, 0, "cpu")                                                   \
  X(SwitchOut, 129, 2, false, 0, "cpu,preempt")                                          \
  X(Migrate, 130, 2, false, 0, "from_cpu,to_cpu")                                        \
  X(SwitchCounts, 131, 5, false, 0, "switch_ins,preempted,blocked,migrations,on_cpu_ns") \
  X(SchedLost, 132, 1, false, 0, "count")                                                \
  X(TaskStart, 133, 1, false, 0, "parent_tid")                                           \
  X(TaskExit, 134, 1, false, 0, "cpu_time")                                              \
  X(ThreadStates, 136, 8, false, 0,                                                      \
    "running,runnable,comm_wait,lock_wait,timer_wait,io_wait,stopped,other_wait")        \
  X(ThreadSample, 137, 5, false, 0, "cpu_time,last_cpu,syscall,state,run_count")         \
  X(CpuSample, 138, 4, false, 0, "busy_ns,idle_ns,iowait_ns,steal_ns")                   \
  X(ProcessSample, 139, 3, false, 0, "cpu_time,threads,exited_cpu")                      \
  /* the switch-record budget stopped the records: in the definitions stream */          \
  X(SwitchesStopped, 140, 7, false, 0,                                                   \
    "pid,records,window_records,window_ns,window_cpu_ns,cost_ns,budget_ppm")             \
  /* recorder */                                                                         \
  X(RingLost, 192, 2, false, 0x2, "count,first_time")                                    \
  /* `parmon ctl`: session-wide, in the definitions stream (docs/control.md) */          \
  X(ControlPause, 193, 0, false, 0, "")                                                  \
  X(ControlResume, 194, 0, false, 0, "")                                                 \
  X(ControlPeriod, 195, 1, false, 0, "period_ns")                                        \
  X(ControlSelect, 196, 1, true, 0, "streams")

namespace parmon::format {

enum class Kind : uint16_t {
#define PARMON_KIND_ENUM_(name, id, nargs, payload, time_mask, arg_names) k##name = id,
  PARMON_EVENT_KINDS(PARMON_KIND_ENUM_)
#undef PARMON_KIND_ENUM_
};

// Location types (DefLocation.type).
enum class LocationType : uint32_t { kThread = 1, kCpu = 2, kProcess = 3 };

// Name categories (DefString.category).
enum class StringCategory : uint32_t {
  kPlain = 0,
  kRegion = 1,
  kCounter = 2,
  kMarker = 3,
  kEvent = 4,
  kFunction = 5,  // interposed functions: MPI_Send, read, poll (MpiEnter.func, ChanRead.func, ...)
  kCallSite = 6,  // where the program called an interposed function: "0x<offset> <module path>"
  kMatrix = 7,    // matrices recorded with parmon_matrix (MatrixData.matrix)
};

// Where a stream's events come from (the chunk header's source field).
enum class Source : uint8_t {
  kDefinitions = 0,
  kRuntime = 1,   // the program's threads through libparmon (API and preload wrappers)
  kSched = 2,     // perf_event_open context switches
  kSampler = 3,   // the /proc sampler
  kRecorder = 4,  // the recorder's own accounting
};

constexpr int kMaxArgs = 8;

// Args written as differences (format 4.0, chunks with kChunkArgDeltas): each arg a kind's mask
// names is a zigzag varint of the arg minus the same arg of the previous event of that kind in
// the chunk (0 before the first). A halo exchange's MpiSend repeats its communicator, size and
// tags and counts its request ids up; as differences those are small numbers that repeat, and
// the halo trace bench/report_bench records went from 2.51 to 1.62 bytes per event. Only kinds that
// never go into a REPEAT RUN (several args, none a time: repeated events leave a kind's previous
// event as it was) and never as one-arg compact events; at most kMaxDeltaKinds of them.
struct KindDeltas {
  uint16_t id;
  uint32_t mask;
};
inline constexpr KindDeltas kKindDeltas[] = {
    {static_cast<uint16_t>(Kind::kMpiSend), 0x1f},         // peer, tag, comm, bytes, request
    {static_cast<uint16_t>(Kind::kMpiRecv), 0x1f},         // the same (posted is a time)
    {static_cast<uint16_t>(Kind::kMpiRequestDone), 0x01},  // request
    {static_cast<uint16_t>(Kind::kMpiCollective), 0x3f},   // every arg
    {static_cast<uint16_t>(Kind::kChanRead), 0x0b},        // fd, bytes, func
    {static_cast<uint16_t>(Kind::kChanWrite), 0x0b},       // the same
    {static_cast<uint16_t>(Kind::kSyncWait), 0x0b},        // object, type, result
    {static_cast<uint16_t>(Kind::kThreadSample), 0x1f},    // cpu_time, run_count: running totals
    {static_cast<uint16_t>(Kind::kProcessSample), 0x07},   // cpu_time, threads, exited_cpu
};
constexpr int kMaxDeltaKinds = 12;
static_assert(std::size(kKindDeltas) <= kMaxDeltaKinds);
constexpr uint8_t kNoDeltaSlot = 0xff;

struct KindInfo {
  uint16_t id;
  const char* name;  // nullptr for an unknown kind
  uint8_t nargs;
  bool has_payload;
  uint32_t time_mask;
  const char* arg_names;
  uint32_t delta_mask = 0;            // args written as differences (kKindDeltas)
  uint8_t delta_slot = kNoDeltaSlot;  // its index in kKindDeltas
};

// Info for a kind id; name == nullptr when the id is not in the table.
const KindInfo& GetKindInfo(uint16_t id);

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_KINDS_H_
