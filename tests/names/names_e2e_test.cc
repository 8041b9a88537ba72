// End-to-end tests of the names parmon gives threads and processes: a process is shown by its
// name after exec (found from the context-switch COMM records, from /proc by the sampler with
// --no-switches, or from libparmon's announcement in the new image), a thread by the name it
// gave itself, a main thread never without a name, the text tables keep rows of one program
// apart, and `dump --tid N` selects thread N, not the CPU numbered N. The oracle is what the
// kernel told the program itself (/proc/self/comm) or, for coreutils, the name exec gives them.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/e2e.h"

namespace parmon::testing {
namespace {

struct Loc {
  std::string type, name, first_name;
  uint32_t pid = 0, tid = 0;
};

// The trace's locations by tid (threads) as `parmon info --json` lists them.
std::map<uint32_t, Loc> Threads(const std::string& trace, std::vector<Loc>* cpus = nullptr) {
  auto r = Parmon({"info", "--json", trace});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  std::map<uint32_t, Loc> out;
  if (!j.is_object() || !j.contains("locations"))
    return out;
  for (const auto& l : j["locations"]) {
    if (!l.contains("type"))
      continue;
    Loc x{l["type"], l.value("name", ""), l.value("first_name", ""), l["pid"], l["tid"]};
    if (x.type == "thread")
      out[x.tid] = x;
    else if (cpus)
      cpus->push_back(x);
  }
  return out;
}

// The program's lines that start with `tag`, split into words after it.
std::vector<std::vector<std::string>> Lines(const std::string& out, const std::string& tag) {
  std::vector<std::vector<std::string>> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string first, w;
    f >> first;
    if (first != tag)
      continue;
    std::vector<std::string> words;
    while (f >> w)
      words.push_back(w);
    v.push_back(words);
  }
  return v;
}

RunResult Record(const TempDir& dir, std::vector<std::string> extra, std::vector<std::string> cmd) {
  std::vector<std::string> args = {"record", "-q", "-o", dir.File("t.ptrace")};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("--");
  args.insert(args.end(), cmd.begin(), cmd.end());
  return Parmon(args, 180);
}

// A child that runs 150 ms under its parent's name and then execs a static program (no
// libparmon in it: only the kernel can tell its new name) is shown by that program's name.
void ExpectExecName(const std::vector<std::string>& record_options) {
  TempDir dir;
  auto r = Record(dir, record_options, {BinDir() + "/names_prog", "exec-static"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto parent = Lines(r.out, "parent");
  auto child = Lines(r.out, "static");
  ASSERT_EQ(parent.size(), 1u) << r.out;
  ASSERT_EQ(child.size(), 1u) << r.out;
  const uint32_t pid = static_cast<uint32_t>(std::stoul(child[0][0]));
  const std::string& comm = child[0][1];  // "names_static", as the kernel told the program
  auto threads = Threads(dir.File("t.ptrace"));
  ASSERT_TRUE(threads.count(pid)) << "no thread " << pid;
  EXPECT_EQ(threads[pid].name, comm);
  EXPECT_EQ(threads[pid].first_name, parent[0][1]) << "the name it had before exec";
  // The parent keeps its own name.
  const uint32_t ppid = static_cast<uint32_t>(std::stoul(parent[0][0]));
  EXPECT_EQ(threads[ppid].name, parent[0][1]);
  // What the report and info show.
  auto rep = Parmon({"report", dir.File("t.ptrace")});
  EXPECT_NE(rep.out.find(comm + " (" + std::to_string(pid) + ")"), std::string::npos) << rep.out;
  auto info = Parmon({"info", dir.File("t.ptrace")});
  EXPECT_NE(info.out.find(parent[0][1] + " -> " + comm), std::string::npos) << info.out;
}

TEST(NamesE2E, ExecTakesTheNewNameFromTheSwitchRecords) {
  ExpectExecName({});
}

TEST(NamesE2E, ExecTakesTheNewNameFromTheSamplerWithoutSwitches) {
  ExpectExecName({"--no-switches"});
}

// fork then exec /bin/true: shown as "true", with or without context-switch records (then
// libparmon's announcement in the new image names it, or its command line when it is gone).
TEST(NamesE2E, ForkExecTrueIsTrue) {
  for (const std::vector<std::string>& opts :
       {std::vector<std::string>{}, std::vector<std::string>{"--no-switches"}}) {
    TempDir dir;
    auto r = Record(dir, opts, {BinDir() + "/names_prog", "exec-true"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto child = Lines(r.out, "child");
    ASSERT_EQ(child.size(), 1u) << r.out;
    const uint32_t pid = static_cast<uint32_t>(std::stoul(child[0][0]));
    auto threads = Threads(dir.File("t.ptrace"));
    ASSERT_TRUE(threads.count(pid)) << "no thread " << pid;
    EXPECT_EQ(threads[pid].name, "true") << (opts.empty() ? "" : opts[0]);
    EXPECT_EQ(threads[pid].first_name, "names_prog");
  }
}

// Threads that name themselves with pthread_setname_np are shown by that name (the kernel's,
// as each read it back); the main thread keeps the program's.
//
// With "setname-quick" the threads end right after naming themselves, one with
// pthread_setname_np and one with prctl(PR_SET_NAME): faster than the sampler reads a name (and
// without switch records there are no COMM records), so the name is libparmon_pthread's, which
// announces it as it is given.
void ExpectThreadsNamedThemselves(const std::string& mode) {
  for (const std::vector<std::string>& opts :
       {std::vector<std::string>{}, std::vector<std::string>{"--no-switches"}}) {
    TempDir dir;
    auto r = Record(dir, opts, {BinDir() + "/names_prog", mode});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto parent = Lines(r.out, "parent");
    auto workers = Lines(r.out, "thread");
    ASSERT_EQ(parent.size(), 1u);
    ASSERT_EQ(workers.size(), 2u) << r.out;
    auto threads = Threads(dir.File("t.ptrace"));
    for (const auto& w : workers) {
      const uint32_t tid = static_cast<uint32_t>(std::stoul(w[0]));
      ASSERT_TRUE(threads.count(tid)) << "no thread " << tid;
      EXPECT_EQ(threads[tid].name, w[1]) << (opts.empty() ? "" : opts[0]);
    }
    const uint32_t pid = static_cast<uint32_t>(std::stoul(parent[0][0]));
    EXPECT_EQ(threads[pid].name, parent[0][1]);
  }
}

TEST(NamesE2E, ThreadsAreShownByTheNamesTheyGaveThemselves) {
  ExpectThreadsNamedThemselves("setname");
}

TEST(NamesE2E, ThreadsThatEndRightAfterNamingThemselvesKeepTheName) {
  ExpectThreadsNamedThemselves("setname-quick");
}

// Short-lived coreutils under sh: every main thread has a name, the one exec gave it.
TEST(NamesE2E, MainThreadsAreNeverNameless) {
  TempDir dir;
  auto r = Record(dir, {"--no-switches"},
                  {"sh", "-c", "/bin/true; /bin/echo one; /bin/true; /bin/echo two"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "one\ntwo\n");
  auto threads = Threads(dir.File("t.ptrace"));
  std::map<std::string, int> mains;
  for (const auto& [tid, l] : threads)
    if (l.pid == tid) {
      EXPECT_FALSE(l.name.empty()) << "main thread " << tid << " has no name";
      ++mains[l.name];
    }
  EXPECT_EQ(mains["sh"], 1);
  EXPECT_EQ(mains["echo"], 2);
  EXPECT_EQ(mains["true"], 2);
}

// Two processes of one name joined by a pipe: the communication table shows both labels whole,
// so the rows can be told apart (the bytes are what the program counted).
TEST(NamesE2E, TextTablesKeepLongLabelsApart) {
  TempDir dir;
  auto r = Record(dir, {}, {BinDir() + "/names_prog", "pipe"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto pipe = Lines(r.out, "pipe");
  ASSERT_EQ(pipe.size(), 2u) << r.out;
  auto rep = Parmon({"report", dir.File("t.ptrace")});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  size_t comm = rep.out.find("== Communication ");
  ASSERT_NE(comm, std::string::npos) << rep.out;
  std::string section = rep.out.substr(comm, rep.out.find("\n\n", comm + 1) - comm);
  // "pipe ROLE PID COMM BYTES": each label "COMM (PID)" whole on one row of the table.
  std::string row;
  for (const auto& p : pipe) {
    ASSERT_EQ(p.size(), 4u);
    EXPECT_EQ(p[3], "1048576") << "the program moved 1 MiB";
    EXPECT_EQ(p[2], "pipeline-stage");
    const std::string label = p[2] + " (" + p[1] + ")";
    EXPECT_NE(section.find(label), std::string::npos) << label << " not in\n" << section;
  }
  EXPECT_EQ(section.find("~"), std::string::npos) << section;
}

// `dump --tid N` prints thread N's events, never those of the CPU location cpuN.
TEST(NamesE2E, DumpTidSelectsThreadsOnly) {
  TempDir dir;
  auto r = Record(dir, {}, {BinDir() + "/names_prog", "setname"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<Loc> cpus;
  auto threads = Threads(dir.File("t.ptrace"), &cpus);
  ASSERT_FALSE(cpus.empty()) << "the sampler records CPU locations";
  for (const auto& cpu : cpus) {
    if (threads.count(cpu.tid))
      continue;  // a thread with that number exists (not on a fresh system)
    auto d = Parmon({"dump", dir.File("t.ptrace"), "--tid", std::to_string(cpu.tid)});
    EXPECT_EQ(d.out, "") << "--tid " << cpu.tid << " printed cpu" << cpu.tid << "'s events";
  }
  auto workers = Lines(r.out, "thread");
  ASSERT_FALSE(workers.empty());
  auto d = Parmon({"dump", dir.File("t.ptrace"), "--tid", workers[0][0]});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  std::istringstream in(d.out);
  std::string line;
  int n = 0;
  const std::string where = "/" + workers[0][0] + " " + workers[0][1] + "]";
  while (std::getline(in, line)) {
    ++n;
    EXPECT_NE(line.find(where), std::string::npos) << line;
  }
  EXPECT_GT(n, 0);
}

}  // namespace
}  // namespace parmon::testing
