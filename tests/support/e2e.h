// Helpers for end-to-end tests: run programs (under `parmon record` or not), capture their
// output, make scratch directories, and open the traces they write.
#ifndef PARMON_TESTS_SUPPORT_E2E_H_
#define PARMON_TESTS_SUPPORT_E2E_H_

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

}  // namespace parmon::testing

#endif  // PARMON_TESTS_SUPPORT_E2E_H_
