// Shared by every example: command-line options, and the counts side file that the tests check
// parmon's recording against (docs/examples.md describes the file).
//
// Every example counts what it does itself (regions entered, messages and bytes sent to and
// received from each peer) in a Counts::Location per thread or MPI rank, and with `--counts FILE`
// writes them as JSON. Each counted thread names itself with parmon_thread_name, and the location's
// "thread" field carries the same name, so a test can pair the file's locations with the trace's.
#ifndef PARMON_EXAMPLES_COMMON_EXAMPLE_H_
#define PARMON_EXAMPLES_COMMON_EXAMPLE_H_

#include <parmon/parmon.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace parmon_examples {

// Declared options of the form `--name value` or `--flag`, parsed once. A bad argument prints one
// sentence to stderr and exits with status 2; `--help` prints the usage and exits with 0.
class Options {
 public:
  Options(std::string program, std::string summary);

  void AddInt(const std::string& name, long fallback, long min, long max, std::string help);
  void AddChoice(const std::string& name,
                 std::string fallback,
                 std::vector<std::string> choices,
                 std::string help);
  void AddString(const std::string& name, std::string fallback, std::string help);
  void AddFlag(const std::string& name, std::string help);

  // Parses argv. `quiet` suppresses messages (every MPI rank but the first).
  void Parse(int argc, char** argv, bool quiet = false);

  long Int(const std::string& name) const;
  const std::string& String(const std::string& name) const;
  bool Flag(const std::string& name) const;

 private:
  enum class Type { kInt, kChoice, kString, kFlag };
  struct Option {
    Type type;
    std::string help;
    std::string value;
    long min = 0;
    long max = 0;
    std::vector<std::string> choices;
  };
  const Option& Find(const std::string& name, Type type) const;
  [[noreturn]] void Fail(const std::string& sentence, bool quiet) const;
  void PrintUsage(FILE* out) const;

  std::string program_;
  std::string summary_;
  std::vector<std::string> order_;
  std::map<std::string, Option> options_;
};

// The rank the MPI launcher gave this process (read from its environment before MPI_Init, so
// that only one rank reports a bad argument), or 0 when not launched by mpirun.
int LauncherRank();

// What one thread (or one MPI rank's main thread) did, in the terms the tests compare with the
// trace. Each location is written by one thread only.
struct Location {
  std::string thread;                       // the name given to parmon_thread_name
  int rank = -1;                            // MPI world rank, -1 outside MPI
  std::map<std::string, uint64_t> regions;  // region name -> times entered
  std::map<int, uint64_t> messages_sent;    // peer -> point-to-point messages
  std::map<int, uint64_t> bytes_sent;
  std::map<int, uint64_t> messages_received;
  std::map<int, uint64_t> bytes_received;
  std::map<std::string, uint64_t> collectives;  // MPI function -> calls
  std::map<uint32_t, uint64_t> trace_data;      // parmon_trace_data event id -> calls

  void CountSend(int peer, uint64_t bytes);
  void CountReceive(int peer, uint64_t bytes);
  nlohmann::json ToJson() const;
};

// A region registered once with parmon; entering it through Scope also counts it.
class Region {
 public:
  explicit Region(const char* name) : name_(name), id_(parmon_region_register(name)) {}
  const char* name() const { return name_; }
  parmon_id id() const { return id_; }

 private:
  const char* name_;
  parmon_id id_;
};

class Scope {
 public:
  Scope(Location& location, const Region& region) : region_(region.id()) {
    ++location.regions[region.name()];
    parmon_region_enter(region_);
  }
  ~Scope() { parmon_region_leave(region_); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  parmon_id region_;
};

// The whole side file: the example's name, parameters, whether its self-check passed, its own
// results (times, speedups, checksums) and one entry per counted location.
struct Report {
  std::string example;
  nlohmann::json params = nlohmann::json::object();
  nlohmann::json results = nlohmann::json::object();
  bool ok = false;
  std::vector<nlohmann::json> locations;

  nlohmann::json ToJson() const;
  // Writes the JSON to `path` (nothing when path is empty). Returns false with a message on
  // stderr when the file cannot be written.
  bool Write(const std::string& path) const;
};

// Examples made of forked processes: each child leaves its location in COUNTS.<thread> (a
// regular file, so a channel monitor does not see it), and the parent adds those of `threads` to
// the report and removes the files. Both return false (with a message) when a file is missing.
bool WriteChildCounts(const std::string& counts, const Location& location);
bool MergeChildCounts(const std::string& counts,
                      const std::vector<std::string>& threads,
                      Report* report);

// Seconds since an arbitrary start, for the examples' own timings.
inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Sleeps for `us` microseconds (nanosleep, restarted when interrupted).
void SleepMicroseconds(long us);

// A small deterministic generator (splitmix64), so every run and every rank sees the same data.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

}  // namespace parmon_examples

#endif  // PARMON_EXAMPLES_COMMON_EXAMPLE_H_
