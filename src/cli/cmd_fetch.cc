// parmon fetch: copy a session held by a collector into a local trace file (or directory of
// rank files), optionally following it while it is recorded. See docs/man/parmon-serve.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "live/fetch.h"
#include "live/protocol.h"

namespace parmon::cli {

int RunFetch(int argc, char** argv) {
  CLI::App app{"Copy a session from a collector (parmon serve) to a local trace.", "parmon fetch"};
  std::string source, output, token_file;
  bool follow = false;
  app.add_option("source", source, "HOST:PORT/SESSION")->required();
  app.add_option("-o,--output", output, "trace file (or directory, for a per-rank session)")
      ->required();
  app.add_flag("-f,--follow", follow, "keep copying until the session ends");
  app.add_option("--token-file", token_file, "file holding the collector's token");
  if (int rc = ParseCommandLine(app, argc, argv, "fetch"); rc >= 0)
    return rc;
  auto ep = live::ParseEndpoint(source);
  if (!ep.ok() || ep->session.empty()) {
    fmt::print(stderr, "parmon fetch: '{}' is not HOST:PORT/SESSION\n", source);
    return kUsageExit;
  }
  auto r = live::FetchSession(fmt::format("{}:{}", ep->host, ep->port), ep->session, output, follow,
                              nullptr, token_file);
  if (!r.ok()) {
    fmt::print(stderr, "parmon fetch: {}\n", r.status().message());
    return 1;
  }
  fmt::print(stderr, "parmon fetch: {} bytes of session {} in {}{}\n", r->bytes, ep->session,
             r->path, r->complete ? "" : " (not complete: the session is still being recorded)");
  return 0;
}

}  // namespace parmon::cli
