#include "live/record_to.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "base/units.h"
#include "live/client.h"
#include "recorder/mpi_launch.h"

namespace parmon::live {

std::string SpoolPath() {
  const char* tmp = getenv("TMPDIR");
  return fmt::format("{}/parmon-spool-{}.ptrace", tmp && *tmp ? tmp : "/tmp", getpid());
}

StatusOr<std::unique_ptr<Forwarder>> StartStreaming(const RecordToArgs& args,
                                                    const std::string& path,
                                                    const std::vector<std::string>& command,
                                                    int attach_pid,
                                                    ControlHandler handler) {
  PARMON_ASSIGN_OR_RETURN(Endpoint ep, ParseEndpoint(args.to));
  PARMON_ASSIGN_OR_RETURN(uint64_t linger_ns, ParseDuration(args.linger, "--to-linger"));
  ForwardOptions o;
  o.endpoint = ep;
  o.path = path;
  o.linger_s = static_cast<double>(linger_ns) / 1e9;
  PARMON_ASSIGN_OR_RETURN(o.hello.token, ReadToken(args.token_file));
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  o.hello.host = host;
  o.hello.pid = getpid();
  std::string program = command.empty() ? fmt::format("pid{}", attach_pid)
                                        : std::filesystem::path(command[0]).filename().string();
  if (auto rank = recorder::RankFromLauncher()) {
    o.hello.rank = rank->rank;
    o.hello.ranks = rank->size;
    o.hello.job = rank->job;
    // Every rank of one job must name the same session; without a job id the launcher's
    // parent process (mpirun) is shared by the ranks of one node only, so a name is needed.
    if (ep.session.empty() && rank->job.empty())
      return Status::Error(
          fmt::format("the {} launcher gives no job id: name the session, --to {}:{}/NAME",
                      rank->launcher, ep.host, ep.port));
    o.hello.session = SanitizeSessionName(program + "-" + rank->job);
  } else {
    o.hello.session = SanitizeSessionName(fmt::format("{}-{}", program, getpid()));
  }
  // An earlier recording's file must not be taken for this one's start.
  unlink(path.c_str());
  auto forwarder = std::make_unique<Forwarder>(std::move(o));
  if (handler)
    forwarder->SetControlHandler(std::move(handler));
  forwarder->Start();
  return forwarder;
}

Status FinishStreaming(Forwarder& forwarder, const std::string& path, bool spooled) {
  Status s = forwarder.Finish();
  if (!s.ok()) {
    fmt::print(stderr, "parmon record: {}\n", s.message());
    return s;
  }
  if (spooled) {
    std::error_code ec;
    std::filesystem::remove(path, ec);  // the collector holds the session
    // Under an MPI launcher the spool is a directory of this rank's file (mpi_launch.h).
    auto parent = std::filesystem::path(path).parent_path();
    if (parent.filename().string().rfind("parmon-spool-", 0) == 0)
      std::filesystem::remove(parent, ec);  // only when empty
  }
  return s;
}

}  // namespace parmon::live
