// Helpers for the live tests: a collector process, background recorder processes, a raw socket
// and a TCP relay that can be cut, all on 127.0.0.1.
#ifndef PARMON_TESTS_LIVE_LIVE_SUPPORT_H_
#define PARMON_TESTS_LIVE_LIVE_SUPPORT_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace parmon::testing {

class TempDir;
class Process;

// The size of a file; 0 when it is not there.
uint64_t SizeOf(const std::string& path);

// `parmon record -q --to TO [extra...] -- program...` in the background, its output in
// dir/NAME.out and dir/NAME.err.
std::unique_ptr<Process> Record(const TempDir& dir,
                                const std::string& name,
                                const std::string& to,
                                const std::vector<std::string>& program,
                                const std::vector<std::string>& extra = {});

// Waits up to timeout_s for cond, polling.
bool WaitFor(const std::function<bool()>& cond, double timeout_s);

// A process started in the background, stdout and stderr to files.
class Process {
 public:
  Process(const std::vector<std::string>& argv,
          const std::string& out_path,
          const std::string& err_path);
  ~Process();  // kills it if still running
  pid_t pid() const { return pid_; }
  // Exit code (128+signal); -1 when it did not end within timeout_s.
  int Wait(double timeout_s);
  void Kill(int sig);
  bool Running();
  std::string Out() const;
  std::string Err() const;

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  bool reaped_ = false;
  std::string out_, err_;
};

// `parmon serve --listen 127.0.0.1:PORT --store STORE extra...` with its port read from stdout.
class Collector {
 public:
  Collector(const std::string& store,
            const std::string& log,
            const std::vector<std::string>& extra = {},
            int port = 0);
  int port() const { return port_; }
  std::string Log() const { return proc_->Err(); }
  Process& process() { return *proc_; }
  std::string Addr() const;

 private:
  std::unique_ptr<Process> proc_;
  int port_ = 0;
};

// A connected TCP socket to 127.0.0.1:port.
int ConnectTo(int port);
// Reads until the peer closes (true) or timeout_s passes (false).
bool ReadUntilClosed(int fd, double timeout_s);

// Forwards 127.0.0.1:listen_port to 127.0.0.1:upstream; Cut() closes every connection and the
// listener (a network cut), Restore() listens again on the same port.
class Relay {
 public:
  explicit Relay(int upstream);
  ~Relay();
  int port() const { return port_; }
  void Cut();
  void Restore();

 private:
  void Listen();
  void Loop();
  void PollOnce();
  int upstream_, port_ = 0, listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  bool cut_ = false;  // guarded by mu_
  std::mutex mu_;     // held by the loop for each poll round
  std::thread thread_;
  std::vector<std::pair<int, int>> pairs_;
};

// Resident set of a process in KiB (VmRSS), 0 when unknown.
long RssKib(pid_t pid);

}  // namespace parmon::testing

#endif  // PARMON_TESTS_LIVE_LIVE_SUPPORT_H_
