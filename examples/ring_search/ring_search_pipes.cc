// ring_search_pipes: the free-text retrieval farm of the Hathi-2 case study (Aspnäs &
// Långbacka, seed 004, section 5) without MPI: the master and --workers worker processes
// (forked) form a unidirectional ring of pipes, 0 -> 1 -> ... -> P-1 -> 0. The program and its
// two forms are those of ring_search.cc (read that first); here the links are pipes, which
// buffer up to 64 KiB, so a worker waits on its output link only once the pipe is full.
//
// --form slow: the master writes a word, then reads all P-1 answers before the next word.
// --form fixed: a second master thread ("master-out") writes every word while the master thread
// reads the answers as they come.
//
// Every message is one fixed-size frame written with one write() and read with one read(), so a
// channel monitor sees exactly one write and one read per message. Counts: per thread ("master",
// "master-out", "worker-<k>"), regions as in ring_search ("receive", "search", "forward";
// "hand_out", "collect", "verify"), frames and bytes per peer process index. Each worker writes
// its counts to FILE.worker-<k>, which the master merges into FILE and removes.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "common/example.h"
#include "ring_search/farm.h"

namespace {

using parmon_examples::Location;
using parmon_examples::Region;
using parmon_examples::Scope;
using ring_search::ResultMessage;
using ring_search::WordMessage;

enum Tag : int32_t { kWord = 1, kResult = 2, kStop = 3 };

struct Frame {
  int32_t tag;
  int32_t unused;
  union {
    WordMessage word;
    ResultMessage result;
  };
};
static_assert(sizeof(Frame) <= 512, "a frame must be written atomically (PIPE_BUF)");

// One link end of the ring, counting what passes.
struct Link {
  int fd = -1;
  int peer = 0;  // process index at the other end
};

bool Write(Location& me, const Link& link, const Frame& f) {
  ssize_t n;
  do
    n = write(link.fd, &f, sizeof f);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof f))
    return false;
  me.CountSend(link.peer, sizeof f);
  return true;
}

bool Read(Location& me, const Link& link, Frame* f) {
  // Frames are written whole and are smaller than PIPE_BUF, so a read returns a whole frame.
  ssize_t n;
  do
    n = read(link.fd, f, sizeof *f);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof *f))
    return false;
  me.CountReceive(link.peer, sizeof *f);
  return true;
}

int RunWorker(int k,
              const std::string& share,
              int64_t base,
              Link in,
              Link out,
              bool last,
              const std::string& counts) {
  static const Region receive("receive"), search("search"), forward("forward");
  Location me;
  me.thread = "worker-" + std::to_string(k);
  parmon_thread_name(me.thread.c_str());
  bool ok = true;
  for (;;) {
    Frame f;
    {
      Scope s(me, receive);
      ok = Read(me, in, &f);
    }
    if (!ok)
      break;
    if (f.tag == kStop || f.tag == kResult) {
      Scope s(me, forward);
      ok = Write(me, out, f);
      if (!ok || f.tag == kStop)
        break;
      continue;
    }
    if (!last) {
      Scope s(me, forward);
      if (!(ok = Write(me, out, f)))
        break;
    }
    Frame r{kResult, 0, {}};
    {
      Scope s(me, search);
      r.result = ring_search::Search(share, base, f.word);
      r.result.worker = k;
    }
    Scope s(me, forward);
    if (!(ok = Write(me, out, r)))
      break;
  }
  if (!ok)
    fprintf(stderr, "ring_search_pipes: worker %d lost its link: %s\n", k, strerror(errno));
  ok = parmon_examples::WriteChildCounts(counts, me) && ok;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  parmon_examples::Options options(
      "ring_search_pipes",
      "Free-text retrieval processor farm on a ring of processes joined by pipes (seed 004),\n"
      "the non-MPI form of ring_search.");
  options.AddChoice("form", "slow", {"slow", "fixed"},
                    "slow: the master waits for every answer before the next word; fixed: not");
  options.AddInt("workers", 3, 1, 64, "worker processes in the ring");
  options.AddInt("words", 1500, 1, 10000000, "number of search words");
  options.AddInt("db-kb", 512, 1, 1 << 20, "size of the text database in KiB");
  options.Parse(argc, argv);
  const int workers = static_cast<int>(options.Int("workers"));
  const long words = options.Int("words");
  const std::string counts = options.String("counts");
  static const Region hand_out("hand_out"), collect("collect"), verify("verify");

  ring_search::Database db = ring_search::MakeDatabase(options.Int("db-kb") * 1024);
  std::vector<int> cut = ring_search::Split(db.text, workers);
  // pipes[k] carries the link from process k to process k+1 (mod P).
  std::vector<std::array<int, 2>> pipes(workers + 1);
  for (auto& p : pipes)
    if (pipe(p.data()) != 0) {
      perror("ring_search_pipes: pipe");
      return 1;
    }
  fflush(stdout);
  std::vector<pid_t> children;
  for (int k = 1; k <= workers; ++k) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("ring_search_pipes: fork");
      return 1;
    }
    if (pid == 0) {
      Link in{pipes[k - 1][0], k - 1};
      Link out{pipes[k][1], k == workers ? 0 : k + 1};
      for (int j = 0; j <= workers; ++j) {
        if (pipes[j][0] != in.fd)
          close(pipes[j][0]);
        if (pipes[j][1] != out.fd)
          close(pipes[j][1]);
      }
      int end = cut[k] - (k == workers ? 1 : 0);
      std::string share = db.text.substr(cut[k - 1], end - cut[k - 1]);
      if (!share.empty() && share.back() == ' ')
        share.pop_back();
      _exit(RunWorker(k, share, cut[k - 1], in, out, k == workers, counts));
    }
    children.push_back(pid);
  }
  Link to_first{pipes[0][1], 1}, from_last{pipes[workers][0], workers};
  for (int j = 0; j <= workers; ++j) {
    if (pipes[j][0] != from_last.fd)
      close(pipes[j][0]);
    if (pipes[j][1] != to_first.fd)
      close(pipes[j][1]);
  }

  Location master, sender;
  master.thread = "master";
  sender.thread = "master-out";
  parmon_thread_name("master");
  ring_search::SearchList list = ring_search::MakeSearchList(db, words);
  std::vector<ResultMessage> results;
  results.reserve(static_cast<size_t>(words * workers));
  bool links_ok = true;
  auto send_word = [&](Location& me, long i) {
    Scope s(me, hand_out);
    Frame f{kWord, 0, {}};
    f.word = list.words[i];
    return Write(me, to_first, f);
  };
  auto collect_one = [&] {
    Frame f;
    if (!Read(master, from_last, &f) || f.tag != kResult)
      return false;
    results.push_back(f.result);
    return true;
  };

  double start = parmon_examples::Now();
  if (options.String("form") == "slow") {
    for (long i = 0; i < words && links_ok; ++i) {
      links_ok = send_word(master, i);
      Scope s(master, collect);
      for (int k = 0; k < workers && links_ok; ++k)
        links_ok = collect_one();
    }
  } else {
    bool sent_ok = true;
    std::thread out([&] {
      parmon_thread_name("master-out");
      for (long i = 0; i < words && sent_ok; ++i)
        sent_ok = send_word(sender, i);
    });
    for (long n = 0; n < words * workers && links_ok; ++n) {
      Scope s(master, collect);
      links_ok = collect_one();
    }
    out.join();
    links_ok = links_ok && sent_ok;
  }
  double seconds = parmon_examples::Now() - start;
  if (links_ok) {
    Frame stop{kStop, 0, {}};
    {
      Scope s(master, hand_out);
      links_ok = Write(master, to_first, stop);
    }
    Scope s(master, collect);
    links_ok = links_ok && Read(master, from_last, &stop) && stop.tag == kStop;
  }
  close(to_first.fd);
  close(from_last.fd);
  bool children_ok = true;
  for (pid_t pid : children) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    children_ok = children_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

  parmon_examples::Report report;
  report.example = "ring_search_pipes";
  bool ok;
  {
    Scope s(master, verify);
    ok = ring_search::VerifyResults(db, list, results, workers, seconds, options.String("form"),
                                    report);
  }
  ok = ok && links_ok && children_ok;
  if (!links_ok)
    fprintf(stderr, "ring_search_pipes: the master lost its link to the ring\n");
  if (!children_ok)
    fprintf(stderr, "ring_search_pipes: a worker failed\n");
  report.ok = ok;
  report.locations.push_back(master.ToJson());
  if (options.String("form") == "fixed")
    report.locations.push_back(sender.ToJson());
  std::vector<std::string> threads;
  for (int k = 1; k <= workers; ++k)
    threads.push_back("worker-" + std::to_string(k));
  if (!parmon_examples::MergeChildCounts(counts, threads, &report))
    ok = report.ok = false;
  if (!report.Write(counts))
    return 1;
  return ok ? 0 : 1;
}
