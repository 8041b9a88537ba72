// Helpers for end-to-end tests: run programs (under `parmon record` or not), capture their
// output, make scratch directories, and open the traces they write.
#ifndef PARMON_TESTS_SUPPORT_E2E_H_
#define PARMON_TESTS_SUPPORT_E2E_H_

#include <cstdint>
#include <string>
#include <vector>

namespace parmon::testing {

// Paths of the build tree, set by CMake.
std::string ParmonBin();  // the parmon executable
std::string BinDir();     // where example and test programs are built
std::string LibDir();     // where libparmon.so is

// Whether path names an existing file or directory.
bool Exists(const std::string& path);

struct RunResult {
  int exit_code = -1;  // 128+signal when killed by a signal
  std::string out;
  std::string err;
};

// Runs argv (argv[0] is looked up in PATH if it has no '/') with extra environment variables
// ("NAME=value"), waits at most timeout_s (then kills it: exit_code = 128+SIGKILL).
RunResult Run(const std::vector<std::string>& argv,
              const std::vector<std::string>& env = {},
              double timeout_s = 120);
// parmon <args...>
RunResult Parmon(const std::vector<std::string>& args, double timeout_s = 120);

// A fresh directory removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path);

// What a thread of examples/duty_cycle measured of itself: one "thread role=R tid=T ..." line
// per thread on its stdout (the keys are documented at the top of duty_cycle.c).
struct Truth {
  std::string role;
  uint32_t tid = 0;
  uint64_t start = 0, end = 0, cpu = 0, blocked = 0, read_begin = 0, read_end = 0, cpu_at_read = 0,
           voluntary = 0, involuntary = 0, sched_run = 0, sched_delay = 0;
};
// The Truth lines of a duty_cycle run's output (other lines are skipped).
std::vector<Truth> ParseTruth(const std::string& out);

// A text report with its wrapped lines joined: every line break and the indent after it become
// one space, so a phrase is found wherever the report's line wrapping cut it.
std::string Unwrapped(const std::string& text);

}  // namespace parmon::testing

#endif  // PARMON_TESTS_SUPPORT_E2E_H_
