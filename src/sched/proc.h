// Readers for the /proc files the sampler polls. Each parser takes the file's text and fills a
// plain struct, so tests can feed it captured text; ProcFile keeps a file open and re-reads it
// with pread(…, 0), which regenerates a /proc seq_file at a cost of one system call. All
// ProcFiles of a thread read into one buffer of that thread (a sampler keeps hundreds open).
#ifndef PARMON_SRC_SCHED_PROC_H_
#define PARMON_SRC_SCHED_PROC_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace parmon::sched {

// An open /proc file read again and again from offset 0.
class ProcFile {
 public:
  ProcFile() = default;
  explicit ProcFile(const std::string& path);
  ~ProcFile();
  ProcFile(ProcFile&& other) noexcept;
  ProcFile& operator=(ProcFile&& other) noexcept;
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;

  bool is_open() const { return fd_ >= 0; }
  // The whole file (at most 64 KiB); empty view when it cannot be read (the task is gone). The
  // view is valid until the next Read of any ProcFile on this thread.
  std::string_view Read();

 private:
  int fd_ = -1;
};

// Reads a small file in one go; empty when it cannot.
std::string ReadProcFile(const std::string& path);

// /proc/<pid>/task/<tid>/stat: the fields the sampler uses.
struct TaskStat {
  char state = '?';
  uint32_t ppid = 0;
  uint64_t utime_ticks = 0, stime_ticks = 0;
  uint64_t num_threads = 0;
  uint64_t start_ticks = 0;  // since boot, in clock ticks
  int32_t processor = -1;    // the CPU it last ran on
  std::string comm;          // field 2, the kernel's name of the thread (15 bytes at most)
};
bool ParseTaskStat(std::string_view text, TaskStat* out);

// /proc/<pid>/task/<tid>/schedstat: "cpu_ns run_delay_ns pcount" (Linux 2.6.9, CONFIG_SCHED_INFO).
struct SchedStat {
  uint64_t cpu_ns = 0;
  uint64_t run_delay_ns = 0;
  uint64_t run_count = 0;
};
bool ParseSchedStat(std::string_view text, SchedStat* out);

// /proc/<pid>/task/<tid>/syscall: the system call a blocked thread is in.
constexpr uint64_t kNoSyscall = ~uint64_t{0};
// Returns the number, kNoSyscall for "running" or "-1 ..." (blocked outside a system call), or
// false when the text is not understood (for example empty: no permission).
bool ParseSyscall(std::string_view text, uint64_t* nr);

// voluntary_ctxt_switches / nonvoluntary_ctxt_switches from /proc/<pid>/task/<tid>/status.
struct SwitchCounters {
  uint64_t voluntary = 0;
  uint64_t involuntary = 0;
};
bool ParseStatusSwitches(std::string_view text, SwitchCounters* out);

// One "cpuN ..." line of /proc/stat, in clock ticks.
struct CpuTimes {
  uint32_t cpu = 0;
  uint64_t busy = 0, idle = 0, iowait = 0, steal = 0;
};
bool ParseProcStat(std::string_view text, std::vector<CpuTimes>* out);

// Nanoseconds per clock tick of the /proc files above (sysconf(_SC_CLK_TCK)).
uint64_t NsPerClockTick();

// The thread ids of a process (its /proc/<pid>/task directory); empty when it is gone.
std::vector<uint32_t> ListTasks(uint32_t pid);
// Children of a task (/proc/<pid>/task/<tid>/children, Linux 3.5 with CONFIG_PROC_CHILDREN).
std::vector<uint32_t> ListChildren(uint32_t pid, uint32_t tid);

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_PROC_H_
