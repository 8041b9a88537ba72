// parmon ctl: steer a running recorder -- pause, resume, change the period, select threads and
// streams, ask its status. See docs/man/parmon-ctl.md and docs/control.md.
//
// A local recorder is reached through its control socket (recorder/control_socket.h), named by
// the recorder's pid or the socket's path; one command line goes out, one reply line comes back.
// A target with a ':' is a collector address (`parmon ctl HOST:PORT SESSION CMD`): that form goes
// through the collector (src/live/), in RunRemoteCtl below.
#include <signal.h>
#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "live/client.h"
#include "recorder/control.h"
#include "recorder/control_socket.h"

namespace parmon::cli {
namespace {

constexpr int kDefaultTimeoutMs = 5000;

// Prints a reply ("ok: ..." to stdout, "error: ..." to stderr); the exit code says which.
int PrintReply(const std::string& reply) {
  if (reply.rfind("ok", 0) == 0) {
    fmt::print("{}\n", reply);
    return 0;
  }
  std::string what = reply.rfind("error: ", 0) == 0 ? reply.substr(7) : reply;
  fmt::print(stderr, "parmon ctl: {}\n", what);
  return 1;
}

// `parmon ctl HOST:PORT SESSION CMD...`: the command goes to the collector, which forwards it to
// the session's recorder in a CONTROL frame (docs/live.md).
int RunRemoteCtl(const std::string& address,
                 const std::vector<std::string>& words,
                 int timeout_ms) {
  (void)timeout_ms;  // the collector bounds the wait for the recorder's reply
  if (words.size() < 2) {
    fmt::print(stderr,
               "parmon ctl: {} is a collector: say which session and what to do (parmon "
               "ctl HOST:PORT SESSION pause)\n",
               address);
    return 2;
  }
  std::string command;
  for (size_t i = 1; i < words.size(); ++i)
    command += (i > 1 ? " " : "") + words[i];
  auto reply = live::SendControl(address, words[0], command);
  if (!reply.ok()) {
    fmt::print(stderr, "parmon ctl: {}\n", reply.status().message());
    return 1;
  }
  if (reply->find('\n') == std::string::npos)
    return PrintReply(*reply);  // one recorder, as a local ctl prints it
  fmt::print("{}\n", *reply);
  // Every recorder's reply is a line "ok: ..." or "error: ..." (one per rank, "rank K: ...").
  return reply->find("error:") == std::string::npos ? 0 : 1;
}

bool AllDigits(const std::string& s) {
  if (s.empty() || s.size() > 9)
    return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  return true;
}

// The socket of a PID or a path, or one sentence saying why there is none.
StatusOr<std::string> ResolveTarget(const std::string& target) {
  if (AllDigits(target)) {
    const pid_t pid = static_cast<pid_t>(std::stol(target));
    const std::string path = recorder::ControlSocketPath(pid);
    struct stat st;
    if (stat(path.c_str(), &st) == 0)
      return path;
    if (kill(pid, 0) != 0 && errno == ESRCH)
      return Status::Error(
          fmt::format("there is no process {} (parmon ctl --list shows the live recorders)", pid));
    return Status::Error(fmt::format(
        "process {} is not a parmon recorder of this user with a control socket (parmon ctl "
        "--list shows the live ones)",
        pid));
  }
  if (target.find('/') != std::string::npos)
    return target;
  return Status::Error(fmt::format(
      "'{}' is neither a recorder's pid, a control socket's path nor a collector's HOST:PORT",
      target));
}

int List(int timeout_ms) {
  auto recorders = recorder::ListLocalRecorders();
  if (recorders.empty()) {
    fmt::print("no live parmon recorder of this user has a control socket in {}\n",
               recorder::ControlSocketDir());
    return 0;
  }
  fmt::print("{:<8} {:<40} {}\n", "PID", "STATUS", "COMMAND");
  for (const auto& r : recorders) {
    auto reply = recorder::SendControlCommand(r.socket, "status", timeout_ms);
    std::string status = reply.ok() ? *reply : "not answering";
    if (status.rfind("ok: ", 0) == 0)
      status = status.substr(
          4, status.find(',') == std::string::npos ? std::string::npos : status.find(',') - 4);
    fmt::print("{:<8} {:<40} {}\n", r.pid, status, r.command);
  }
  return 0;
}

}  // namespace

int RunCtl(int argc, char** argv) {
  CLI::App app{
      "Steer a running recorder: parmon ctl PID|SOCKET CMD, parmon ctl HOST:PORT SESSION CMD.\n"
      "Commands: pause, resume, period DURATION, threads TID,..|all, streams "
      "regions,mpi,posix,sched|all, status.",
      "parmon ctl"};
  bool list = false;
  int timeout_ms = kDefaultTimeoutMs;
  std::vector<std::string> words;
  app.add_flag("--list", list, "list the live local recorders and their state");
  app.add_option("--timeout", timeout_ms, "milliseconds to wait for the reply (default 5000)")
      ->check(CLI::Range(1, 600000));
  app.add_option("words", words, "TARGET then the command and its argument");
  app.positionals_at_end();
  if (int rc = ParseCommandLine(app, argc, argv, "ctl"); rc >= 0)
    return rc;
  if (list)
    return List(timeout_ms);
  if (words.size() < 2) {
    fmt::print(stderr,
               "parmon ctl: give a recorder and a command: parmon ctl PID pause (parmon ctl "
               "--list shows the recorders)\n");
    return kUsageExit;
  }
  const std::string target = words[0];
  words.erase(words.begin());
  if (target.find(':') != std::string::npos)
    return RunRemoteCtl(target, words, timeout_ms);
  std::string command;
  for (const auto& w : words)
    command += (command.empty() ? "" : " ") + w;
  // Checked here too, so a typo is reported without reaching the recorder.
  if (auto parsed = recorder::ParseControlCommand(command); !parsed.ok()) {
    fmt::print(stderr, "parmon ctl: {}\n", parsed.status().message());
    return kUsageExit;
  }
  auto path = ResolveTarget(target);
  if (!path.ok()) {
    fmt::print(stderr, "parmon ctl: {}\n", path.status().message());
    return 1;
  }
  auto reply = recorder::SendControlCommand(*path, command, timeout_ms);
  if (!reply.ok()) {
    // A socket file left by a recorder that was killed, whose pid another process has since
    // taken: that process is not a recorder.
    if (AllDigits(target) && kill(static_cast<pid_t>(std::stol(target)), 0) == 0 &&
        reply.status().message().rfind("no recorder listens on", 0) == 0) {
      fmt::print(stderr,
                 "parmon ctl: process {} is not a parmon recorder (nothing listens on {}, a "
                 "socket left by an earlier recorder of that pid; parmon ctl --list shows the "
                 "live ones)\n",
                 target, *path);
      return 1;
    }
    fmt::print(stderr, "parmon ctl: {}\n", reply.status().message());
    return 1;
  }
  return PrintReply(*reply);
}

}  // namespace parmon::cli
