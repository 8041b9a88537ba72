// parmon serve: the collector daemon. See docs/man/parmon-serve.md and docs/live.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "live/client.h"
#include "live/protocol.h"
#include "live/server.h"

namespace parmon::cli {

int RunServe(int argc, char** argv) {
  CLI::App app{"Collect sessions streamed by `parmon record --to` and serve them to consumers.",
               "parmon serve"};
  std::string listen = "127.0.0.1:7878", token_file;
  live::ServeOptions o;
  app.add_option("--listen", listen,
                 "address and port to listen on (port 0: any free port, printed on stdout); an "
                 "address other than loopback needs --token-file")
      ->capture_default_str();
  app.add_option("--store", o.store, "directory of the sessions' trace files")
      ->capture_default_str();
  app.add_option("--token-file", token_file,
                 "file whose first line is the token every recorder and consumer must present");
  app.add_option("--max-connections", o.max_connections,
                 "connections at once; more are refused with a log line")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--exec", o.exec,
                 "run this shell command per new stream with the stream's trace bytes on its "
                 "standard input");
  app.add_option("--idle-timeout", o.idle_timeout_s,
                 "seconds without a frame after which a recorder is dropped")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  if (int rc = ParseCommandLine(app, argc, argv, "serve"); rc >= 0)
    return rc;
  auto ep = live::ParseEndpoint(listen);
  if (!ep.ok() || !ep->session.empty()) {
    fmt::print(stderr, "parmon serve: --listen {}: {}\n", listen,
               ep.ok() ? "give ADDRESS:PORT without a session" : ep.status().message());
    return kUsageExit;
  }
  o.host = ep->host;
  o.port = ep->port;
  if (!token_file.empty()) {
    auto token = live::ReadToken(token_file);
    if (!token.ok()) {
      fmt::print(stderr, "parmon serve: {}\n", token.status().message());
      return kUsageExit;
    }
    o.token = *token;
  }
  auto server = live::Server::Create(o);
  if (!server.ok()) {
    fmt::print(stderr, "parmon serve: {}\n", server.status().message());
    return 1;
  }
  // Line 1 of stdout: the port, for scripts and tests that listen on port 0.
  fmt::print("{}\n", (*server)->port());
  fflush(stdout);
  fmt::print(stderr, "parmon serve: listening on {}:{}, storing in {}{}\n", o.host,
             (*server)->port(), o.store, o.token.empty() ? "" : ", token required");
  (*server)->Run();
  return 0;
}

}  // namespace parmon::cli
