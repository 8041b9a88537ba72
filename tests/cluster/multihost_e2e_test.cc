// End-to-end test of per-rank recorders on several hosts (issue 19, docs/cluster.md): a real MPI
// program (programs/ring_late.c) run by Open MPI's mpirun across three hosts simulated with
// network namespaces that the test creates and always deletes. The hosts are joined by a bridge
// in a namespace of their own, so that no address or interface of the machine's own namespace is
// touched; the ranks talk over TCP between the hosts' addresses (and only there: the TCP
// transport and mpirun's out-of-band channel are restricted to that subnet). mpirun starts its
// daemon on each host through an rsh agent the test writes (`ip netns exec` and a host name of
// its own in a UTS namespace, in place of ssh); each rank runs under its own `parmon record`,
// which writes into its host's own directory with its host's clock offset injected
// (PARMON_MPI_CLOCK_SKEW_NS). `parmon report` of the three directories together must find the
// program's message counts exactly, each rank's late-sender time within 5% of what the program
// measured itself, and the clock offsets injected.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/e2e.h"
#include "support/report_json.h"

namespace parmon::testing {
namespace {

using nlohmann::json;

// Every namespace of a run is named kPrefix<pid of the test>-<role>.
constexpr char kPrefix[] = "parmon-mh";
// The hosts' subnet exists only inside the test's namespaces.
constexpr char kSubnet[] = "10.213.71.0/24";
std::string Address(int host) {
  return "10.213.71." + std::to_string(host + 1);
}

// Three hosts: ranks 0 and 1 on host 0, rank 2 on host 1, rank 3 on host 2. Each host's clock is
// off by its own amount: rank 0's host too, so the report must find the differences.
constexpr int kHosts = 3;
constexpr int kSlots[kHosts] = {2, 1, 1};
constexpr int kRanks = 4;
constexpr long long kSkewNs[kHosts] = {2'000'000, 9'000'000, -6'000'000};
constexpr int kHostOfRank[kRanks] = {0, 0, 1, 2};
// 16 rounds, one rank 30 ms late in each: every rank is the late one's neighbour 4 times, so
// every rank's late-sender time is 120 ms or more and 5% of it is 6 ms or more; unaligned, the
// 7 and 8 ms between the hosts' clocks would shift each message crossing hosts by that much.
constexpr int kRounds = 16;
constexpr int kDelayMs = 30;

bool ProcessAlive(pid_t pid) {
  return kill(pid, 0) == 0 || errno == EPERM;
}

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;)
    words.push_back(w);
  return words;
}

// Kills what still runs in the namespace (processes this test started there: mpirun's daemons,
// ranks, recorders) and deletes it, with the veth ends and bridge it holds.
void DeleteNamespace(const std::string& ns) {
  RunResult pids = Run({"ip", "netns", "pids", ns}, {}, 10);
  for (const std::string& p : Words(pids.out))
    kill(static_cast<pid_t>(std::stol(p)), SIGKILL);
  Run({"ip", "netns", "del", ns}, {}, 10);
}

// Namespaces left by a run of this test that was killed before it could delete them (a timeout's
// SIGKILL): those whose test process is gone.
void DeleteStaleNamespaces() {
  RunResult list = Run({"ip", "netns", "list"}, {}, 10);
  std::istringstream in(list.out);
  for (std::string line; std::getline(in, line);) {
    const std::string ns = line.substr(0, line.find(' '));
    if (ns.rfind(kPrefix, 0) != 0)
      continue;
    const std::string rest = ns.substr(sizeof kPrefix - 1);
    const pid_t pid = static_cast<pid_t>(std::atol(rest.c_str()));
    if (pid > 0 && pid != getpid() && !ProcessAlive(pid))
      DeleteNamespace(ns);
  }
}

// The simulated hosts of one run: a switch namespace with a bridge, and one namespace per host
// with lo and one veth whose other end is on the bridge. Deleted when the object dies, whatever
// the test's outcome.
class SimulatedHosts {
 public:
  SimulatedHosts() : tag_(kPrefix + std::to_string(getpid())) {}
  ~SimulatedHosts() {
    for (auto it = created_.rbegin(); it != created_.rend(); ++it)
      DeleteNamespace(*it);
  }
  SimulatedHosts(const SimulatedHosts&) = delete;
  SimulatedHosts& operator=(const SimulatedHosts&) = delete;

  std::string Switch() const { return tag_ + "-sw"; }
  std::string Host(int h) const { return tag_ + "-h" + std::to_string(h); }  // namespace, hostname

  // Creates the switch's namespace; its failure means this machine cannot run the test.
  bool CreateSwitch(std::string* why) {
    if (!Ip({"netns", "add", Switch()}, why))
      return false;
    created_.push_back(Switch());
    return Ip({"-n", Switch(), "link", "set", "lo", "up"}, why) &&
           Ip({"-n", Switch(), "link", "add", "br0", "type", "bridge"}, why) &&
           Ip({"-n", Switch(), "link", "set", "br0", "up"}, why);
  }

  bool AddHost(int h, std::string* why) {
    const std::string ns = Host(h), port = "p" + std::to_string(h);
    if (!Ip({"netns", "add", ns}, why))
      return false;
    created_.push_back(ns);
    // The veth is made inside the switch's namespace, its peer inside the host's: neither end
    // ever exists in the machine's own namespace.
    return Ip({"-n", ns, "link", "set", "lo", "up"}, why) &&
           Ip({"-n", Switch(), "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns",
               ns},
              why) &&
           Ip({"-n", Switch(), "link", "set", port, "master", "br0"}, why) &&
           Ip({"-n", Switch(), "link", "set", port, "up"}, why) &&
           Ip({"-n", ns, "addr", "add", Address(h) + "/24", "dev", "eth0"}, why) &&
           Ip({"-n", ns, "link", "set", "eth0", "up"}, why);
  }

 private:
  static bool Ip(std::vector<std::string> args, std::string* why) {
    args.insert(args.begin(), "ip");
    RunResult r = Run(args, {}, 20);
    if (r.exit_code == 0)
      return true;
    *why = "`";
    for (const auto& a : args)
      *why += (why->size() > 1 ? " " : "") + a;
    *why += "` failed (exit " + std::to_string(r.exit_code) + "): " + r.err;
    return false;
  }

  std::string tag_;
  std::vector<std::string> created_;
};

void WriteScript(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  chmod(path.c_str(), 0755);
}

// The rsh agent mpirun runs in place of ssh: `agent <host address> <command words...>`. Like
// ssh it runs the words joined by spaces through a shell, on that host: in its network
// namespace, under its host name (a UTS namespace of its own).
std::string AgentScript(const SimulatedHosts& hosts) {
  std::string s =
      "#!/bin/sh\n"
      "# rsh agent written by cluster_multihost_e2e_test: runs a command on a simulated host\n"
      "host=$1\nshift\ncase \"$host\" in\n";
  for (int h = 0; h < kHosts; ++h)
    s += "  " + Address(h) + ") ns=" + hosts.Host(h) + " ;;\n";
  s += "  *) echo \"agent: no simulated host $host\" >&2; exit 255 ;;\nesac\n"
       "exec ip netns exec \"$ns\" unshare --uts sh -c 'hostname \"$1\" && exec sh -c \"$2\"' "
       "agent \"$ns\" \"$*\"\n";
  return s;
}

// What each rank runs: its recorder, writing into its host's directory, with its host's clock
// offset; the host is told by the host name the agent gave it.
std::string RankScript(const SimulatedHosts& hosts, const std::string& base) {
  std::string s = "#!/bin/sh\ncase \"$(hostname)\" in\n";
  for (int h = 0; h < kHosts; ++h)
    s += "  " + hosts.Host(h) + ") skew=" + std::to_string(kSkewNs[h]) + " ;;\n";
  s += "  *) echo \"rank: not on a simulated host: $(hostname)\" >&2; exit 1 ;;\nesac\n";
  s += "PARMON_MPI_CLOCK_SKEW_NS=$skew exec " + ParmonBin() + " record -q -o \"" + base +
       "/$(hostname)/run\" -- " + BinDir() + "/ring_late " + std::to_string(kRounds) + " " +
       std::to_string(kDelayMs) + "\n";
  return s;
}

// The program's own figures, one line per rank printed by rank 0.
struct RankTruth {
  std::string host;
  uint64_t sent = 0, received = 0;
  double late_sender_ns = -1;
};

std::map<int, RankTruth> ParseTruth(const std::string& out) {
  std::map<int, RankTruth> truth;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> w = Words(line);
    if (w.size() != 10 || w[0] != "rank" || w[2] != "host" || w[4] != "sent" ||
        w[6] != "received" || w[8] != "late_sender_ns")
      continue;
    RankTruth& t = truth[std::stoi(w[1])];
    t.host = w[3];
    t.sent = std::stoull(w[5]);
    t.received = std::stoull(w[7]);
    t.late_sender_ns = std::stod(w[9]);
  }
  return truth;
}

// The uncertainty of each rank's clock offset at each epoch (rank -> epoch -> ns): half the
// round trip of the ping-pong the MPI wrappers kept (docs/events.md, Clock alignment), from the
// MpiClockSync events of rank 0's file (peer = r) and rank r's (peer = 0), which `parmon dump`
// prints on each recorder's own clock. report_args: `report --format json` and the hosts'
// directories.
std::map<int, std::map<uint64_t, double>> ClockUncertainty(
    const std::vector<std::string>& report_args) {
  struct Half {
    double t_send = 0, t_recv = 0;
  };
  std::map<std::pair<int, uint64_t>, Half> rank0, other;  // (rank, epoch)
  for (int h = 0; h < kHosts; ++h) {
    int rank = -1;  // the host's one rank other than 0
    for (int k = 1; k < kRanks; ++k)
      if (kHostOfRank[k] == h)
        rank = k;
    RunResult dump = Parmon({"dump", report_args[3 + h]});
    std::istringstream in(dump.out);
    for (std::string line; std::getline(in, line);) {
      if (line.find("MpiClockSync") == std::string::npos)
        continue;
      std::map<std::string, double> f;
      for (const std::string& w : Words(line))
        if (size_t eq = w.find('='); eq != std::string::npos)
          f[w.substr(0, eq)] = std::stod(w.substr(eq + 1));
      const auto peer = static_cast<int>(f["peer"]);
      const auto epoch = static_cast<uint64_t>(f["epoch"]);
      if (peer != 0)
        rank0[{peer, epoch}] = {f["t_send"], f["t_recv"]};
      else
        other[{rank, epoch}] = {f["t_send"], f["t_recv"]};
    }
  }
  std::map<int, std::map<uint64_t, double>> out;
  for (const auto& [key, x] : other) {
    auto z = rank0.find(key);
    if (z != rank0.end())
      out[key.first][key.second] =
          ((z->second.t_recv - z->second.t_send) - (x.t_send - x.t_recv)) / 2;
  }
  return out;
}

std::string WhyNotAvailable() {
  if (geteuid() != 0)
    return "needs root to create network namespaces";
  if (Run({"ip", "-V"}, {}, 10).exit_code != 0)
    return "needs iproute2's `ip` (network namespaces, veth, bridge)";
  if (Run({"unshare", "--version"}, {}, 10).exit_code != 0)
    return "needs util-linux's `unshare` (a host name per simulated host)";
  if (Run({"mpirun", "--version"}, {}, 20).out.find("Open MPI") == std::string::npos)
    return "needs Open MPI's mpirun (its rsh agent starts the simulated hosts' daemons)";
  if (!Exists(LibDir() + "/libparmon_mpi.so") || !Exists(BinDir() + "/ring_late"))
    return "needs libparmon_mpi and MPI";
  return "";
}

TEST(ClusterMultiHostE2E, RanksOnThreeNamespaceHostsReportedFromTheirHostsDirectories) {
  if (std::string why = WhyNotAvailable(); !why.empty())
    GTEST_SKIP() << why;
  DeleteStaleNamespaces();
  SimulatedHosts hosts;
  std::string why;
  if (!hosts.CreateSwitch(&why))
    GTEST_SKIP() << "cannot create network namespaces here: " << why;
  for (int h = 0; h < kHosts; ++h)
    ASSERT_TRUE(hosts.AddHost(h, &why)) << why;

  TempDir dir;
  const std::string agent = dir.File("agent.sh"), rank = dir.File("rank.sh");
  WriteScript(agent, AgentScript(hosts));
  WriteScript(rank, RankScript(hosts, dir.path()));
  for (int h = 0; h < kHosts; ++h)
    ASSERT_EQ(mkdir(dir.File(hosts.Host(h)).c_str(), 0755), 0);

  // mpirun itself runs on host 0 (so its ranks there start without the agent), and reaches the
  // other hosts' daemons at their addresses.
  std::string host_list;
  for (int h = 0; h < kHosts; ++h)
    host_list += (h ? "," : "") + Address(h) + ":" + std::to_string(kSlots[h]);
  const std::vector<std::string> argv = {"ip",
                                         "netns",
                                         "exec",
                                         hosts.Host(0),
                                         "unshare",
                                         "--uts",
                                         "sh",
                                         "-c",
                                         "hostname \"$0\" && exec \"$@\"",
                                         hosts.Host(0),
                                         "mpirun",
                                         "--allow-run-as-root",
                                         "--oversubscribe",
                                         "--mca",
                                         "plm_rsh_agent",
                                         agent,
                                         "--mca",
                                         "btl",
                                         "tcp,self",
                                         "--mca",
                                         "btl_tcp_if_include",
                                         kSubnet,
                                         "--mca",
                                         "oob_tcp_if_include",
                                         kSubnet,
                                         "--host",
                                         host_list,
                                         "-np",
                                         std::to_string(kRanks),
                                         rank};
  RunResult run = parmon::testing::Run(argv, {}, 45);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;

  // Where the ranks ran, by their own account: each on its host.
  std::map<int, RankTruth> truth = ParseTruth(run.out);
  ASSERT_EQ(truth.size(), static_cast<size_t>(kRanks)) << run.out << run.err;
  double injected_total = 0;
  for (int k = 0; k < kRanks; ++k) {
    EXPECT_EQ(truth[k].host, hosts.Host(kHostOfRank[k])) << "rank " << k;
    EXPECT_EQ(truth[k].sent, static_cast<uint64_t>(kRounds));
    injected_total += truth[k].late_sender_ns;
  }
  // Each round the late rank's right neighbour waits for it (the check below is not vacuous).
  ASSERT_GT(injected_total, 0.9 * kRounds * kDelayMs * 1e6) << run.out;

  // Each host's directory holds its own ranks' files only, and each recorder recorded its host.
  std::vector<std::string> report = {"report", "--format", "json"};
  for (int h = 0; h < kHosts; ++h)
    report.push_back(dir.File(hosts.Host(h)) + "/run");
  for (int k = 0; k < kRanks; ++k) {
    const std::string file = "/rank-" + std::to_string(k) + ".ptrace";
    for (int h = 0; h < kHosts; ++h)
      EXPECT_EQ(Exists(report[3 + h] + file), h == kHostOfRank[k]) << "host " << h << file;
    RunResult info = Parmon({"info", report[3 + kHostOfRank[k]] + file});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    EXPECT_NE(info.out.find("host        " + hosts.Host(kHostOfRank[k]) + "\n"), std::string::npos)
        << info.out;
  }

  RunResult rep = Parmon(report);
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  json r = json::parse(rep.out);
  EXPECT_EQ(r["summary"]["ranks"].get<int>(), kRanks);

  // The clocks: every rank's offset from rank 0's is its host's injected offset less host 0's,
  // within what the ping-pongs can tell: half the round trip of the one kept at that epoch. Under
  // load that is up to a few ms (4 ranks and their recorders on 2 busy cores: rank 0 and rank r
  // must both be scheduled for every round trip); 20 us more for the skew hook's conversion of
  // ns to ticks (a 20 ms calibration).
  std::map<int, std::map<uint64_t, double>> uncertainty = ClockUncertainty(report);
  ASSERT_TRUE(r["summary"]["clocks_aligned"].get<bool>()) << r["summary"].dump();
  ASSERT_EQ(r["summary"]["clock_offsets"].size(), static_cast<size_t>(kRanks - 1));
  for (const auto& c : r["summary"]["clock_offsets"]) {
    const int k = c["rank"].get<int>();
    ASSERT_GT(k, 0);
    ASSERT_LT(k, kRanks);
    const auto& u = uncertainty[k];
    ASSERT_EQ(u.size(), c["epochs"].get<size_t>()) << "rank " << k;
    const double want = static_cast<double>(kSkewNs[kHostOfRank[k]] - kSkewNs[0]);
    EXPECT_NEAR(c["offset_ns"].get<double>(), want, u.begin()->second + 20e3) << "rank " << k;
    EXPECT_NEAR(c["last_offset_ns"].get<double>(), want, u.rbegin()->second + 20e3) << "rank " << k;
  }

  // Messages exactly as the program counted them, each rank's to its right neighbour; late
  // senders within 5% of what each receiver measured.
  for (int k = 0; k < kRanks; ++k) {
    const json* l = RankLocation(r, k);
    ASSERT_NE(l, nullptr) << "rank " << k;
    EXPECT_EQ((*l)["mpi_messages_sent"].get<uint64_t>(), truth[k].sent) << "rank " << k;
    EXPECT_EQ((*l)["mpi_messages_received"].get<uint64_t>(), truth[k].received) << "rank " << k;
    const json* link = MpiLink(r, k, (k + 1) % kRanks);
    ASSERT_NE(link, nullptr) << "rank " << k;
    EXPECT_EQ((*link)["messages"].get<uint64_t>(), truth[k].sent) << "rank " << k;
    const double want = truth[k].late_sender_ns;
    EXPECT_NEAR((*l)["late_sender_ns"].get<double>(), want, 0.05 * want) << "rank " << k;
  }
  size_t mpi_links = 0;
  for (const auto& l : r["links"])
    mpi_links += l["kind"] == "mpi";
  EXPECT_EQ(mpi_links, static_cast<size_t>(kRanks));
}

}  // namespace
}  // namespace parmon::testing
