// mergesort_procs: the distributed mergesort of Duato & Malumbres (seed 001, section 3) without
// MPI, as the paper wrote it: every split spawns the sorting of one half on node this ^ tbase,
// here a forked process joined to its parent by two pipes (the half goes down one, comes back
// sorted up the other). Nodes 1..--nodes-1 form the same tree as mergesort.cc: 0 -> 1;
// 0 -> 2, 1 -> 3; 0 -> 4, ...
//
// A list travels as one write of [length, values...] (64-bit words); the receiver reads until it
// has it all, so a channel monitor sees one write per message and the exact bytes both ways.
// Self-check: node 0 verifies the order and that the output is a permutation of the input.
// Counts: per process "node-<k>", regions ("split", "sort_local", "merge", "wait_child",
// "receive_work", "return_work"), messages and bytes per peer node. Every other node writes its
// counts to FILE.node-<k>, which node 0 merges into FILE and removes.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/example.h"
#include "mergesort/sort_common.h"

namespace {

using mergesort::Mix;
using mergesort::RegionLocal;
using mergesort::RegionMerge;
using mergesort::RegionSplit;
using mergesort::RegionWait;
using parmon_examples::Location;
using parmon_examples::Region;
using parmon_examples::Scope;

bool WriteList(Location& me, int fd, int peer, const std::vector<uint64_t>& message) {
  const char* p = reinterpret_cast<const char*>(message.data());
  size_t left = message.size() * 8;
  while (left > 0) {  // a blocking write of a pipe normally takes it all at once
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    left -= static_cast<size_t>(n);
  }
  me.CountSend(peer, message.size() * 8);
  return true;
}

bool ReadAll(int fd, void* buf, size_t bytes) {
  char* p = static_cast<char*>(buf);
  while (bytes > 0) {
    ssize_t n = read(fd, p, bytes);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// Reads one [length, values...] message.
bool ReadList(Location& me, int fd, int peer, std::vector<uint64_t>* values) {
  uint64_t length = 0;
  if (!ReadAll(fd, &length, 8))
    return false;
  values->resize(length);
  if (!ReadAll(fd, values->data(), length * 8))
    return false;
  me.CountReceive(peer, (length + 1) * 8);
  return true;
}

struct Node {
  int id = 0;
  int nodes = 1;
  std::string counts;
  Location me;
  bool ok = true;
};

int RunChild(Node& parent_view, int child, uint64_t tbase, int down, int up);

// mergesort(v) of the paper: `tbase` says which node the next split goes to.
void Sort(Node& node, std::vector<uint64_t>& v, uint64_t tbase) {
  int child = static_cast<int>(static_cast<uint64_t>(node.id) ^ tbase);
  if (child >= node.nodes || tbase >= static_cast<uint64_t>(node.nodes)) {
    Scope s(node.me, RegionLocal());
    std::sort(v.begin(), v.end());
    return;
  }
  size_t k1 = (v.size() + 1) / 2;
  int down[2], up[2];
  pid_t pid;
  {
    Scope s(node.me, RegionSplit());
    if (pipe(down) != 0 || pipe(up) != 0) {
      perror("mergesort_procs: pipe");
      exit(1);
    }
    fflush(stdout);
    pid = fork();
    if (pid < 0) {
      perror("mergesort_procs: fork");
      exit(1);
    }
    if (pid == 0) {
      close(down[1]);
      close(up[0]);
      _exit(RunChild(node, child, tbase << 1, down[0], up[1]));
    }
    close(down[0]);
    close(up[1]);
    std::vector<uint64_t> first;
    first.reserve(k1 + 1);
    first.push_back(k1);
    first.insert(first.end(), v.begin(), v.begin() + static_cast<long>(k1));
    node.ok = WriteList(node.me, down[1], child, first) && node.ok;
    close(down[1]);
  }
  std::vector<uint64_t> second(v.begin() + static_cast<long>(k1), v.end());
  Sort(node, second, tbase << 1);
  std::vector<uint64_t> first;
  {
    Scope s(node.me, RegionWait());
    node.ok = ReadList(node.me, up[0], child, &first) && first.size() == k1 && node.ok;
    close(up[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    node.ok = node.ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!node.ok)
    return;
  Scope s(node.me, RegionMerge());
  std::merge(first.begin(), first.end(), second.begin(), second.end(), v.begin());
}

// A spawned node: receives its list, sorts it (spawning further), returns it, leaves its counts.
int RunChild(Node& parent_view, int child, uint64_t tbase, int down, int up) {
  static const Region receive_work("receive_work"), return_work("return_work");
  Node node;
  node.id = child;
  node.nodes = parent_view.nodes;
  node.counts = parent_view.counts;
  node.me.thread = "node-" + std::to_string(child);
  parmon_thread_name(node.me.thread.c_str());
  int parent = parent_view.id;
  std::vector<uint64_t> v;
  {
    Scope s(node.me, receive_work);
    node.ok = ReadList(node.me, down, parent, &v);
    close(down);
  }
  if (node.ok)
    Sort(node, v, tbase);
  if (node.ok) {
    Scope s(node.me, return_work);
    v.insert(v.begin(), v.size());
    node.ok = WriteList(node.me, up, parent, v);
  }
  close(up);
  node.ok = parmon_examples::WriteChildCounts(node.counts, node.me) && node.ok;
  return node.ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  parmon_examples::Options options(
      "mergesort_procs",
      "Distributed mergesort (seed 001) without MPI: each split forks node this^tbase and\n"
      "sends it one half through a pipe.");
  options.AddInt("n", 4000000, 1, 400000000, "number of 64-bit keys to sort");
  options.AddInt("nodes", 4, 1, 64, "processes (nodes) the sort may spread over");
  options.Parse(argc, argv);
  Node root;
  root.nodes = static_cast<int>(options.Int("nodes"));
  root.counts = options.String("counts");
  root.me.thread = "node-0";
  parmon_thread_name("node-0");
  const long n = options.Int("n");

  std::vector<uint64_t> v(static_cast<size_t>(n));
  parmon_examples::Random random(2024);
  uint64_t hash_in = 0;
  for (auto& x : v) {
    x = random.Next();
    hash_in += Mix(x);
  }
  double start = parmon_examples::Now();
  Sort(root, v, 1);
  double seconds = parmon_examples::Now() - start;
  uint64_t hash_out = 0;
  for (uint64_t x : v)
    hash_out += Mix(x);
  bool sorted = root.ok && v.size() == static_cast<size_t>(n) &&
                std::is_sorted(v.begin(), v.end()) && hash_in == hash_out;

  parmon_examples::Report report;
  report.example = "mergesort_procs";
  report.params = {{"nodes", root.nodes}, {"n", n}};
  report.results = {{"seconds", seconds}, {"sorted", sorted}};
  report.locations.push_back(root.me.ToJson());
  std::vector<std::string> threads;
  for (int k = 1; k < root.nodes; ++k)
    threads.push_back("node-" + std::to_string(k));
  bool counts_ok = parmon_examples::MergeChildCounts(root.counts, threads, &report);
  report.ok = sorted && counts_ok;
  printf("mergesort_procs: %ld keys over %d processes in %.3f s: %s\n", n, root.nodes, seconds,
         sorted ? "sorted" : "NOT SORTED");
  if (!report.Write(root.counts))
    return 1;
  return report.ok ? 0 : 1;
}
