// The local control channel of a running recorder: a unix-domain stream socket, one command line
// in, one reply line out, then the connection closes (`parmon ctl PID CMD`).
//
// Where: $XDG_RUNTIME_DIR/parmon/<recorder pid>.ctl, or /tmp/parmon-<uid>/<pid>.ctl when there is
// no runtime directory. The directory is the user's own (mode 0700, checked: not a symlink, not
// someone else's), the socket mode 0600, so only the user who runs the recorder can steer it.
// The socket is removed when the recorder ends.
//
// One thread serves it, one connection at a time: a client has 2 s to send its line (4 KiB at
// most), so a stuck or hostile client delays others by that much and holds no memory. The handler
// runs on that thread (Control::Apply is thread-safe); the recorder's loop never waits for it.
#ifndef PARMON_SRC_RECORDER_CONTROL_SOCKET_H_
#define PARMON_SRC_RECORDER_CONTROL_SOCKET_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"

namespace parmon::recorder {

// The directory of the control sockets of this user's recorders (not created).
std::string ControlSocketDir();
// The socket of the recorder with process id pid.
std::string ControlSocketPath(pid_t pid);

class ControlSocket {
 public:
  using Handler = std::function<std::string(const std::string&)>;
  // Creates the directory if needed, binds and listens at ControlSocketPath(getpid()) and starts
  // the serving thread.
  static StatusOr<std::unique_ptr<ControlSocket>> Start(Handler handler);
  ~ControlSocket();  // stops the thread and removes the socket
  const std::string& path() const { return path_; }

 private:
  ControlSocket() = default;
  void Serve();
  void ServeOne(int fd);

  Handler handler_;
  std::string path_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // eventfd: the destructor wakes the thread
  std::thread thread_;
};

// Sends one command line to the socket at `path` and returns the reply line (without its
// newline). Errors are one sentence: no such recorder, not answering within timeout_ms, ...
StatusOr<std::string> SendControlCommand(const std::string& path,
                                         const std::string& command,
                                         int timeout_ms);

struct LocalRecorder {
  pid_t pid = 0;
  std::string socket;
  std::string command;  // the recorder's command line, from /proc
};
// The live recorders of this user that have a control socket (stale sockets are skipped).
std::vector<LocalRecorder> ListLocalRecorders();

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_CONTROL_SOCKET_H_
