// parmon top: the live view of a recording. See docs/man/parmon-top.md.
//
// `parmon top FILE` follows a trace another `parmon record -o FILE` is writing (or has written);
// `parmon top -- CMD ARGS` starts `parmon record -q -o TRACE -- CMD ARGS` itself, as a child
// process in its own process group (so that the keys and Ctrl-C reach top, and top decides when
// the recording stops: q interrupts it the way Ctrl-C interrupts `parmon record`), and follows
// TRACE. A child rather than the recorder in this process: the recorder owns its signals
// (signalfd) and child reaping, which a terminal UI in the same process would fight with. The
// program's output goes to a log file beside the trace, not over the screen.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "cli/report_common.h"
#include "live/client.h"
#include "live/fetch.h"
#include "live/protocol.h"
#include "live_view/top.h"
#include "recorder/control_socket.h"
#include "recorder/recorder.h"

namespace parmon::cli {
namespace {

namespace fs = std::filesystem;

// The recorder child of `top -- CMD`.
// A control reply ("ok: ..." or "error: <sentence>") or a failure to deliver it, as a Status.
Status ReplyStatus(const StatusOr<std::string>& reply) {
  if (!reply.ok())
    return reply.status();
  if (reply->find("error: ") != std::string::npos)
    return Status::Error(reply->substr(reply->find("error: ") + 7));
  return Status::Ok();
}

class RecorderChild {
 public:
  // Starts this executable's `record -q -o trace -- command`, its output into log.
  Status Start(const std::string& trace,
               const std::string& log,
               const std::vector<std::string>& command) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec)
      return Status::Error(fmt::format("cannot find the parmon executable: {}", ec.message()));
    std::vector<std::string> args = {"parmon", "record", "-q", "-o", trace, "--"};
    args.insert(args.end(), command.begin(), command.end());
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || in < 0)
      return Status::Error(fmt::format("cannot create {}: {}", log, strerror(errno)));
    pid_ = fork();
    if (pid_ == 0) {
      // Its own process group: Ctrl-C on the terminal reaches top, which stops the recording.
      setpgid(0, 0);
      dup2(in, STDIN_FILENO);
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
      execv(self.c_str(), argv.data());
      _exit(127);
    }
    close(out);
    close(in);
    if (pid_ < 0)
      return Status::Error(fmt::format("cannot start the recorder: {}", strerror(errno)));
    return Status::Ok();
  }
  // Whether it has exited (reaps it).
  bool Exited() {
    if (pid_ <= 0)
      return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pid_ = -1;
      return true;
    }
    return false;
  }
  // Interrupts the recording (the recorder forwards SIGINT to the program and closes the trace)
  // and waits for it; killed after 20 s.
  void Stop() {
    if (Exited())
      return;
    kill(pid_, SIGINT);
    for (int i = 0; i < 2000 && !Exited(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!Exited()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  int exit_code() const { return exit_code_; }

 private:
  pid_t pid_ = -1;

 public:
  pid_t pid() const { return pid_; }
  int exit_code_ = -1;
};

// The last `max` bytes of a file ("" when it cannot be read).
std::string ReadTail(const std::string& path, size_t max) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > max ? text.substr(text.size() - max) : text;
}

}  // namespace

int RunTop(int argc, char** argv) {
  // Everything after "--" is the command to record.
  std::vector<std::string> command;
  int own = argc;
  for (int i = 1; i < argc; ++i)
    if (!strcmp(argv[i], "--")) {
      own = i;
      command.assign(argv + i + 1, argv + argc);
      break;
    }
  CLI::App app{
      "Watch a recording live: per thread the state split of the last interval, CPUs, "
      "the busiest links and the diagnosis as it appears.",
      "parmon top"};
  std::string path, period = "1s", color = "auto", output;
  bool batch = false;
  uint64_t iterations = 0;
  app.add_option("file", path, "trace file or session directory being written (or written)");
  app.add_option("-d,--period", period, "refresh period (default 1s)");
  app.add_flag("-b,--batch", batch,
               "plain text, one screen per refresh, no keys (chosen when not on a terminal)");
  app.add_option("-n,--iterations", iterations, "batch: stop after this many refreshes");
  app.add_option("-o,--output", output,
                 "with -- CMD: the trace to record (default: a new "
                 "temporary directory)");
  AddColorOption(app, &color);
  if (int rc = ParseCommandLine(app, own, argv, "top"); rc >= 0)
    return rc;
  live_view::TopOptions options;
  if (!recorder::ParseDuration(period, &options.period_ns) || options.period_ns < 100'000'000) {
    fmt::print(stderr, "parmon top: --period {} is not a duration of 100ms or more\n", period);
    return kUsageExit;
  }
  if (path.empty() == command.empty()) {
    fmt::print(stderr, "parmon top: give a trace file or -- CMD [ARGS...] (not both)\n");
    return kUsageExit;
  }
  options.batch = batch;
  options.iterations = iterations;
  options.color = UseColor(color, "");
  options.analysis.default_event_cost_ns = kDefaultEventCostNs;
  options.analysis.default_switch_record_cost_ns = kDefaultSwitchRecordCostNs;
  if (command.empty()) {
    // A collector's session: its live analysis answers (PARMON_FOLLOW_LOCAL: fetch and analyse
    // here, as before).
    const bool ask_collector =
        live::IsRemoteSession(path) && getenv("PARMON_FOLLOW_LOCAL") == nullptr;
    auto source = ask_collector ? StatusOr<live_view::LiveSource>(live_view::LiveSource{})
                                : live_view::ResolveLiveSource(path);
    if (!source.ok()) {
      fmt::print(stderr, "parmon top: {}\n", source.status().message());
      return 1;
    }
    if (live::IsRemoteSession(path)) {
      // p pauses the recording itself, through the collector (parmon ctl HOST:PORT SESSION).
      auto ep = live::ParseEndpoint(path);
      if (ep.ok()) {
        const std::string host_port = fmt::format("{}:{}", ep->host, ep->port);
        options.on_pause = [host_port, session = ep->session](bool pause) {
          return ReplyStatus(live::SendControl(host_port, session, pause ? "pause" : "resume"));
        };
      }
    }
    if (ask_collector)
      return live_view::RunTopRemote(path, options);
    return live_view::RunTop(*source, options);
  }

  std::string dir;
  if (output.empty()) {
    char tmpl[] = "/tmp/parmon-top-XXXXXX";
    if (!mkdtemp(tmpl)) {
      fmt::print(stderr, "parmon top: cannot create a temporary directory: {}\n", strerror(errno));
      return 1;
    }
    dir = tmpl;
    output = dir + "/top.ptrace";
  }
  const std::string log = output + ".log";
  RecorderChild child;
  if (Status s = child.Start(output, log, command); !s.ok()) {
    fmt::print(stderr, "parmon top: {}\n", s.message());
    return 1;
  }
  live_view::LiveSource source;
  source.path = output;
  source.writer_gone = [&child] { return child.Exited(); };
  // p pauses the recording itself, through the recorder's local control socket (parmon ctl).
  options.on_pause = [&child](bool pause) {
    return ReplyStatus(recorder::SendControlCommand(recorder::ControlSocketPath(child.pid()),
                                                    pause ? "pause" : "resume", 2000));
  };
  int rc = live_view::RunTop(source, options);
  child.Stop();
  if (rc != 0) {
    // Why the recording did not start, most likely: the recorder's own words.
    std::string said = ReadTail(log, 2000);
    if (!said.empty())
      fmt::print(stderr, "{}", said);
  }
  std::error_code ec;
  if (fs::exists(output, ec))
    fmt::print(stderr, "parmon top: the recording is in {} (the program's output in {})\n", output,
               log);
  if (rc == 0 && child.exit_code() != 0 && child.exit_code() != 128 + SIGINT)
    fmt::print(stderr, "parmon top: the recording exited with status {}\n", child.exit_code());
  return rc;
}

}  // namespace parmon::cli
