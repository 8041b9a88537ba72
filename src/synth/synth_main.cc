// parmon-synth: writes a synthetic per-rank session (src/synth/halo_session.h) for benchmarks,
// tests run by hand and docs/cluster.md's figures. A tool beside parmon, not a `parmon`
// command: users never need it, and the CLI's command table stays what users see.
//
//   parmon-synth -o RUN --ranks 4096 --iterations 100 [--threads 2] [--truth truth.json]
//
// It prints what a report of RUN must find (messages, late-sender time); --truth writes the
// per-rank figures as JSON.
#include <cstdio>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "synth/halo_session.h"

int main(int argc, char** argv) {
  parmon::synth::HaloOptions o;
  std::string out, truth_path;
  double compute_us = 200, late_us = 2000, offset_us = 3000;
  CLI::App app{"Write a synthetic per-rank parmon session (a halo exchange with late senders)"};
  app.add_option("-o,--output", out, "session directory to write (rank-<K>.ptrace files)")
      ->required();
  app.add_option("--ranks", o.ranks, "MPI ranks (one file each)");
  app.add_option("--iterations", o.iterations, "halo exchanges per rank");
  app.add_option("--compute-us", compute_us, "compute per iteration (us)");
  app.add_option("--late-every", o.late_every,
                 "every N iterations one rank computes longer (0: never)");
  app.add_option("--late-us", late_us, "how much longer the late rank computes (us)");
  app.add_option("--ranks-per-host", o.ranks_per_host, "ranks sharing one host's clock");
  app.add_option("--host-offset-us", offset_us, "clock offset step between hosts (us)");
  app.add_option("--threads", o.threads, "files written at once");
  app.add_option("--truth", truth_path, "write the per-rank expected figures as JSON");
  CLI11_PARSE(app, argc, argv);
  o.compute_ns = static_cast<uint64_t>(compute_us * 1e3);
  o.late_ns = static_cast<uint64_t>(late_us * 1e3);
  o.host_offset_ns = static_cast<int64_t>(offset_us * 1e3);
  auto truth = parmon::synth::WriteHaloSession(out, o);
  if (!truth.ok()) {
    fmt::print(stderr, "parmon-synth: {}\n", truth.status().message());
    return 1;
  }
  fmt::print("{}: {} ranks, {} iterations, {} events, {} messages, late sender {:.3f} ms\n", out,
             o.ranks, o.iterations, truth->events, truth->total_messages,
             static_cast<double>(truth->total_late_sender_ns) / 1e6);
  if (!truth_path.empty()) {
    nlohmann::json j;
    j["events"] = truth->events;
    j["messages"] = truth->total_messages;
    j["late_sender_ns"] = truth->late_sender_ns;
    j["messages_sent"] = truth->messages_sent;
    j["clock_offset_ns"] = truth->clock_offset_ns;
    std::ofstream f(truth_path);
    f << j.dump(1) << "\n";
    if (!f) {
      fmt::print(stderr, "parmon-synth: cannot write {}\n", truth_path);
      return 1;
    }
  }
  return 0;
}
