// `parmon view --follow` end to end over real sockets on 127.0.0.1: a real program recorded with
// `parmon record --to` into a real `parmon serve`, followed by `parmon view` as it runs. While it
// runs, /api/session's end grows and every answer is a prefix of the final one (rows and slices
// only added, the state split of what is well behind the end unchanged); once the recording
// ends, every answer equals that of `parmon view` on the collector's stored file. Bad input: a
// path that does not exist, a session the collector does not have, a damaged file, a recorder
// killed mid-run: one sentence each, and the view never hangs.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "live/live_support.h"
#include "support/e2e.h"
#include "web/http_client.h"

namespace parmon::testing {
namespace {

using nlohmann::json;

// GET target from 127.0.0.1:port, the body parsed (null when there was no 200 answer).
json GetJson(int port, const std::string& target) {
  int fd = ConnectTo(port);
  if (fd < 0)
    return nullptr;
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string req = "GET " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return nullptr;
  }
  std::string in;
  char buf[1 << 16];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
    in.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t body = in.find("\r\n\r\n");
  if (in.rfind("HTTP/1.1 200", 0) != 0 || body == std::string::npos)
    return nullptr;
  return json::parse(in.substr(body + 4), nullptr, false);
}

std::string State(const json& session) {
  return session.is_object() && session.contains("live")
             ? session["live"]["state"].get<std::string>()
             : "";
}

// Waits up to timeout_s for a view's /api/session to say ended; its last answer.
json WaitForEnded(const View& v, double timeout_s) {
  json s;
  WaitFor(
      [&] {
        s = GetJson(v.port, "/api/session");
        return State(s) == "ended";
      },
      timeout_s);
  return s;
}

// The slices of a timeline answer as (row, begin, end, depth, kind, name) tuples.
std::set<std::vector<uint64_t>> SlicesOf(const json& timeline) {
  std::set<std::vector<uint64_t>> out;
  for (const json& row : timeline["rows"])
    for (const json& s : row["slices"])
      out.insert({row["id"].get<uint64_t>(), s[0], s[1], s[2], s[3], s[4]});
  return out;
}

// The slices of every row of a /api/session answer.
uint64_t SlicesIn(const json& session) {
  uint64_t n = 0;
  for (const json& r : session["rows"])
    n += r["slices"].get<uint64_t>();
  return n;
}

TEST(ViewLive, FollowsACollectorSessionAndEndsEqualToTheStoredFile) {
  signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"));
  ASSERT_GT(c.port(), 0);
  auto rec =
      Record(dir, "rec", c.Addr() + "/live", {BinDir() + "/duty_cycle", "--seconds", "5", "basic"});
  View live = StartView(
      dir, "view", {"view", "--follow", "--period", "0.25", "--port", "0", c.Addr() + "/live"});
  ASSERT_GT(live.port, 0) << live.proc->Err();

  // While it runs: the end grows, and each moment's answers are kept to compare with the end's.
  struct Moment {
    json session, timeline, graph;
    std::string query, graph_query;
  };
  std::vector<Moment> moments;
  std::vector<uint64_t> ends;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (rec->Running() && std::chrono::steady_clock::now() < give_up) {
    json s = GetJson(live.port, "/api/session");
    ASSERT_TRUE(s.is_object()) << live.proc->Err();
    EXPECT_EQ(s["live"]["following"], c.Addr() + "/live");
    if (State(s) == "live") {
      const uint64_t end = s["end"];
      EXPECT_EQ(s["live"]["complete_until"].get<uint64_t>(), end);
      EXPECT_TRUE(s["live"]["growing"].get<bool>());
      ends.push_back(end);
      if (end > 300'000'000) {  // the part 200 ms behind the end, at 200 px
        const std::string range = "t0=0&t1=" + std::to_string(end - 200'000'000);
        const std::string q = "/api/timeline?" + range + "&px=200",
                          g = "/api/graph?" + range + "&steps=50";
        moments.push_back({s, GetJson(live.port, q), GetJson(live.port, g), q, g});
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  ASSERT_EQ(rec->Wait(60), 0) << rec->Err();
  const json final_session = WaitForEnded(live, 60);
  ASSERT_EQ(State(final_session), "ended") << final_session.dump() << live.proc->Err();
  EXPECT_FALSE(final_session["live"]["growing"].get<bool>());

  // It was followed: at least three different ends seen, never going back.
  ASSERT_GE(ends.size(), 3u) << "the view showed the session live too rarely";
  EXPECT_GT(ends.back(), ends.front());
  for (size_t i = 1; i < ends.size(); ++i)
    EXPECT_GE(ends[i], ends[i - 1]);
  EXPECT_GE(final_session["end"].get<uint64_t>(), ends.back());
  ASSERT_GE(moments.size(), 2u);

  // Every moment was a prefix of the end: its rows are rows of the end with no more slices or
  // events; its slices are slices of the end's answer to the same query; and the state split of
  // each row (per step of /api/graph) is the end's, up to the time its states covered then (its
  // sampler's last span may lag the end) and the first wait of that row still going on then (a
  // wait is recorded when it ends, and the time it covers then becomes wait time: the sampler's
  // split is shown meanwhile). Exact but for the rounding of a sampler span's split where a
  // later record cut it (1 ns per state).
  size_t compared_steps = 0;
  std::map<uint64_t, json> final_rows;
  for (const json& r : final_session["rows"])
    final_rows[r["id"].get<uint64_t>()] = r;
  for (const Moment& m : moments) {
    for (const json& r : m.session["rows"]) {
      ASSERT_TRUE(final_rows.count(r["id"].get<uint64_t>())) << r.dump();
      const json& f = final_rows[r["id"].get<uint64_t>()];
      EXPECT_LE(r["slices"].get<uint64_t>(), f["slices"].get<uint64_t>()) << r.dump();
      EXPECT_LE(r["events"].get<uint64_t>(), f["events"].get<uint64_t>()) << r.dump();
    }
    ASSERT_TRUE(m.timeline.is_object()) << m.query;
    const json now = GetJson(live.port, m.query);
    ASSERT_TRUE(now.is_object()) << m.query;
    std::map<uint64_t, json> now_rows;
    for (const json& r : now["rows"])
      now_rows[r["id"].get<uint64_t>()] = r;
    const uint64_t moment_end = m.session["end"];
    const json open =
        GetJson(live.port, "/api/timeline?t0=0&t1=" + std::to_string(moment_end) + "&px=400");
    ASSERT_TRUE(open.is_object());
    std::map<uint64_t, uint64_t> settled_until;  // per row: what its states covered then,
    for (const json& r : m.session["rows"])      // and before its first wait open then
      settled_until[r["id"].get<uint64_t>()] = r["states_until"].get<uint64_t>();
    for (const json& r : open["rows"])
      for (const json& sl : r["slices"])
        if (sl[3] == 2 && sl[0].get<uint64_t>() < moment_end &&
            sl[1].get<uint64_t>() > moment_end) {
          auto [it, added] = settled_until.try_emplace(r["id"].get<uint64_t>(), sl[0]);
          it->second = std::min<uint64_t>(it->second, sl[0]);
        }
    const json graph_now = GetJson(live.port, m.graph_query);
    ASSERT_TRUE(m.graph.is_object() && graph_now.is_object()) << m.graph_query;
    ASSERT_EQ(m.graph["bounds"], graph_now["bounds"]);
    std::map<uint64_t, json> nodes_now;
    for (const json& n : graph_now["nodes"])
      nodes_now[n["id"].get<uint64_t>()] = n;
    for (const json& n : m.graph["nodes"]) {
      const uint64_t id = n["id"];
      ASSERT_TRUE(nodes_now.count(id)) << "row " << id;
      const uint64_t until =
          settled_until.count(id) ? settled_until[id] : std::numeric_limits<uint64_t>::max();
      for (size_t k = 0; k + 1 < m.graph["bounds"].size(); ++k) {
        if (m.graph["bounds"][k + 1].get<uint64_t>() > until)
          break;
        for (size_t st = 0; st < n["states"][k].size(); ++st)
          EXPECT_NEAR(n["states"][k][st].get<double>(),
                      nodes_now[id]["states"][k][st].get<double>(), 2)
              << m.graph_query << " row " << id << " step " << k << " state " << st;
        ++compared_steps;
      }
    }
    const auto then_slices = SlicesOf(m.timeline), end_slices = SlicesOf(now);
    for (const auto& s : then_slices)
      EXPECT_TRUE(end_slices.count(s)) << m.query << ": a slice shown live is not in the end's";
  }
  EXPECT_GT(compared_steps, 50u);
  std::cout << "followed: " << ends.size() << " answers while it ran, end " << ends.front() / 1e6
            << " -> " << ends.back() / 1e6 << " ms, final "
            << final_session["end"].get<uint64_t>() / 1e6 << " ms; " << moments.size()
            << " moments compared (" << compared_steps << " graph steps equal within 2 ns), slices "
            << SlicesIn(moments.front().session) << " -> " << SlicesIn(final_session) << "\n";
  // It grew: the first moment showed fewer slices than the end has.
  EXPECT_LT(SlicesIn(moments.front().session), SlicesIn(final_session));

  // The end equals `parmon view` of the stored file.
  View post = StartView(dir, "post", {"view", "--port", "0", dir.File("store/live.ptrace")});
  ASSERT_GT(post.port, 0) << post.proc->Err();
  json post_session = GetJson(post.port, "/api/session");
  ASSERT_TRUE(post_session.is_object());
  json live_session = final_session;
  live_session.erase("live");  // and the live fields of its rows
  for (json& r : live_session["rows"])
    r.erase("states_until");
  for (json* s : {&live_session, &post_session})
    s->erase("file");  // the name given: HOST:PORT/SESSION and the stored file's path
  EXPECT_EQ(live_session, post_session);
  const uint64_t end = post_session["end"];
  const std::string range = "t0=0&t1=" + std::to_string(end);
  for (const std::string& q :
       {"/api/timeline?" + range + "&px=700", "/api/cpus?" + range + "&px=700",
        "/api/timeline?t0=" + std::to_string(end / 3) + "&t1=" + std::to_string(end / 2) +
            "&px=300",
        "/api/messages?" + range, std::string("/api/findings"), "/api/matrix?" + range,
        "/api/graph?" + range + "&steps=10"}) {
    const json a = GetJson(live.port, q), b = GetJson(post.port, q);
    ASSERT_TRUE(a.is_object() && b.is_object()) << q;
    EXPECT_EQ(a, b) << q;
  }
}

// The sidecar of a stored stream says it ended (the collector holds its last byte).
bool StreamEnded(const std::string& store, const std::string& key) {
  std::ifstream in(store + "/.streams/" + key + ".meta");
  std::stringstream text;
  text << in.rdbuf();
  const json meta = json::parse(text.str(), nullptr, false);
  return meta.is_object() && meta.value("ended", false);
}

// A /api/session answer without what only a followed view has (live, states_until) and the
// file's name: what a post-mortem view of the same session answers.
json AsPostMortem(json s) {
  s.erase("live");
  s.erase("file");
  for (json& r : s["rows"])
    r.erase("states_until");
  return s;
}

// The ranks of the rows of a /api/session answer (rows outside MPI, rank -1, left out: the
// shell and the sleep that rank 1 runs after the program).
std::set<int> RanksOf(const json& session) {
  std::set<int> out;
  for (const json& r : session["rows"])
    if (r.contains("rank") && r["rank"].is_number_integer() && r["rank"].get<int>() >= 0)
      out.insert(r["rank"].get<int>());
  return out;
}

// `parmon view HOST:PORT/SESSION` of a per-rank MPI session whose ranks end at different times
// (issue 15): rank 1 starts 2 s after rank 0 (so the view, started first, finds rank 0 alone)
// and ends 4 s after it. The view shows both ranks' rows, says live (growing) after rank 0's
// stream ended and before rank 1's did, as the collector's sidecars say, and ended after; then
// every answer equals `parmon view` of the session fetched from the collector after the run.
TEST(ViewLive, PerRankSessionEndsOnlyWhenEveryRankOfTheWorldHasEnded) {
  signal(SIGPIPE, SIG_IGN);
  if (access((BinDir() + "/saturation").c_str(), X_OK) != 0 || access("/usr/bin/mpirun", X_OK) != 0)
    GTEST_SKIP() << "no MPI example or no mpirun";
  TempDir dir;
  const std::string store = dir.File("store");
  Collector c(store, dir.File("serve.log"));
  ASSERT_GT(c.port(), 0);
  View v =
      StartView(dir, "view", {"view", "--period", "0.2", "--port", "0", c.Addr() + "/stagger"});
  ASSERT_GT(v.port, 0) << v.proc->Err();
  const std::string record = ParmonBin() + " record -q --to " + c.Addr() + "/stagger -- ";
  const std::string work = BinDir() + "/saturation --rounds 300 --bytes 64 --delay-us 2000";
  Process mpi(
      {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "1", "sh", "-c", record + work,
       ":", "-np", "1", "sh", "-c", "sleep 2 && " + record + "sh -c '" + work + " && sleep 4'"},
      dir.File("mpirun.out"), dir.File("mpirun.err"));
  // Rank 0's stream ended, rank 1's not yet: the view shows both ranks and stays live.
  ASSERT_TRUE(WaitFor([&] { return StreamEnded(store, "stagger+rank-0") || !mpi.Running(); }, 180))
      << mpi.Err() << c.Log();
  ASSERT_FALSE(StreamEnded(store, "stagger+rank-1")) << "rank 1 ended with rank 0: " << c.Log();
  json s = GetJson(v.port, "/api/session");
  const uint64_t refreshes = s.is_object() ? s["live"]["refreshes"].get<uint64_t>() : 0;
  size_t looked = 0, polls = 0;
  std::string states;
  while (!StreamEnded(store, "stagger+rank-1")) {
    s = GetJson(v.port, "/api/session");
    ASSERT_TRUE(s.is_object()) << v.proc->Err();
    if (StreamEnded(store, "stagger+rank-1"))
      break;  // the answer may be after rank 1's end
    states += State(s) + " ";
    ++polls;
    EXPECT_NE(State(s), "ended") << "ended while rank 1 was still streaming: " << s["live"].dump();
    EXPECT_TRUE(s["live"]["growing"].get<bool>()) << s["live"].dump();
    if (s["live"]["refreshes"].get<uint64_t>() > refreshes) {
      EXPECT_EQ(RanksOf(s), (std::set<int>{0, 1})) << s["rows"].dump();
      ++looked;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_GE(looked, 2u) << "the view was not seen refreshed between the two ends: " << states;
  ASSERT_EQ(mpi.Wait(120), 0) << mpi.Err();
  const json final_session = WaitForEnded(v, 120);
  ASSERT_EQ(State(final_session), "ended") << final_session.dump() << v.proc->Err();
  EXPECT_FALSE(final_session["live"]["growing"].get<bool>());
  EXPECT_EQ(RanksOf(final_session), (std::set<int>{0, 1}));

  // The oracle: the session fetched from the collector after the run, viewed post mortem.
  auto fetched = Parmon({"fetch", c.Addr() + "/stagger", "-o", dir.File("fetched")});
  ASSERT_EQ(fetched.exit_code, 0) << fetched.err;
  View post = StartView(dir, "post", {"view", "--port", "0", dir.File("fetched")});
  ASSERT_GT(post.port, 0) << post.proc->Err();
  json post_session = GetJson(post.port, "/api/session");
  ASSERT_TRUE(post_session.is_object());
  EXPECT_EQ(AsPostMortem(final_session), AsPostMortem(post_session));
  const uint64_t end = post_session["end"];
  const std::string range = "t0=0&t1=" + std::to_string(end);
  for (const std::string& q :
       {"/api/timeline?" + range + "&px=500", "/api/cpus?" + range + "&px=500",
        "/api/messages?" + range + "&limit=2000", std::string("/api/findings"),
        "/api/matrix?" + range, "/api/graph?" + range + "&steps=10"}) {
    const json a = GetJson(v.port, q), b = GetJson(post.port, q);
    ASSERT_TRUE(a.is_object() && b.is_object()) << q;
    EXPECT_EQ(a, b) << q;
  }
  std::cout << "per-rank follow: " << looked << " live answers with both ranks between the ends ("
            << polls << " polls), final end " << end / 1e6 << " ms\n";
}

// `parmon view --follow DIR` of a per-rank session recorded into a local directory (no
// collector): rank 1's recorder starts 3 s after launch, when rank 0's file (a 0.3 s program)
// has long been closed. The view must not take "every file there is closed" for the end: it
// waits for a file of each rank of the world (mpi_size), and its final answers have both ranks'
// rows and equal `parmon view` of the directory after the run. (Before, it ended with rank 0's
// rows alone.)
TEST(ViewLive, LocalPerRankDirectoryEndsOnlyWithEveryRanksFile) {
  signal(SIGPIPE, SIG_IGN);
  if (access("/usr/bin/mpirun", X_OK) != 0)
    GTEST_SKIP() << "no mpirun";
  TempDir dir;
  const std::string run = dir.File("run");
  const std::string record = ParmonBin() + " record -q -o " + run + " -- sleep 0.3";
  Process mpi({"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "1", "sh", "-c", record,
               ":", "-np", "1", "sh", "-c", "sleep 3 && " + record},
              dir.File("mpirun.out"), dir.File("mpirun.err"));
  // The view refuses a path that is not there: started once rank 0's file is.
  ASSERT_TRUE(
      WaitFor([&] { return testing::Exists(run + "/rank-0.ptrace") || !mpi.Running(); }, 120))
      << mpi.Err();
  View v = StartView(dir, "view", {"view", "--follow", "--period", "0.2", "--port", "0", run});
  ASSERT_GT(v.port, 0) << v.proc->Err();
  ASSERT_EQ(mpi.Wait(180), 0) << mpi.Err();
  const json final_session = WaitForEnded(v, 120);
  ASSERT_EQ(State(final_session), "ended") << final_session.dump() << v.proc->Err();
  View post = StartView(dir, "post", {"view", "--port", "0", run});
  ASSERT_GT(post.port, 0) << post.proc->Err();
  json post_session = GetJson(post.port, "/api/session");
  ASSERT_TRUE(post_session.is_object());
  ASSERT_GE(post_session["rows"].size(), 2u) << post_session.dump();
  EXPECT_EQ(final_session["rows"].size(), post_session["rows"].size()) << final_session.dump();
  EXPECT_EQ(AsPostMortem(final_session), AsPostMortem(post_session));
}

// A view that cannot be: one sentence and a non-zero status, at once.
TEST(ViewLive, APathThatDoesNotExistIsOneSentence) {
  auto r = Parmon({"view", "--follow", "/nonexistent/run.ptrace", "--port", "0"}, 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// A session the collector does not have: the view serves at once, says it is waiting, and
// ends the follow with the collector's answer (a fetch asks again for up to a minute).
TEST(ViewLive, ASessionTheCollectorDoesNotHaveEndsInOneSentence) {
  signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  Collector c(dir.File("store"), dir.File("serve.log"));
  View v = StartView(dir, "view", {"view", c.Addr() + "/nosuch", "--port", "0"});
  ASSERT_GT(v.port, 0) << v.proc->Err();
  json s = GetJson(v.port, "/api/session");
  EXPECT_EQ(State(s), "waiting") << s.dump();
  EXPECT_EQ(s["rows"].size(), 0u);
  ASSERT_TRUE(WaitFor(
      [&] {
        s = GetJson(v.port, "/api/session");
        return State(s) == "failed";
      },
      120))
      << s.dump();
  const std::string why = s["live"]["lost"];
  EXPECT_NE(why.find("nosuch"), std::string::npos) << why;
  EXPECT_EQ(GetJson(v.port, "/api/timeline?px=10")["rows"].size(), 0u);
}

// A trace damaged in its middle: what is intact is served, and the damage is named.
TEST(ViewLive, ADamagedFileIsServedFromWhatIsIntact) {
  signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  const std::string trace = dir.File("t.ptrace");
  auto r = Parmon(
      {"record", "-q", "-o", trace, "--", BinDir() + "/duty_cycle", "--seconds", "1", "basic"},
      120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  {
    std::fstream f(trace, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff size = f.tellg();
    ASSERT_GT(size, 20000);
    f.seekp(size / 2);
    const std::string junk(64, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  View v = StartView(dir, "view", {"view", "--follow", trace, "--port", "0"});
  ASSERT_GT(v.port, 0) << v.proc->Err();
  json s;
  ASSERT_TRUE(WaitFor(
      [&] {
        s = GetJson(v.port, "/api/session");
        const std::string state = State(s);
        return !state.empty() && state != "waiting" && state != "live";
      },
      60))
      << s.dump();
  EXPECT_GT(s["live"]["problems"].size() + (State(s) == "failed" ? 1 : 0), 0u) << s.dump();
  EXPECT_GT(s["rows"].size(), 0u) << s.dump();
}

// The recorder killed mid-run: the view stops following, keeps what was written and says what
// was lost.
TEST(ViewLive, ARecorderKilledMidRunIsSaidAndTheViewKeepsWhatWasWritten) {
  signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  const std::string trace = dir.File("local.ptrace");
  Process rec({ParmonBin(), "record", "-q", "-o", trace, "--", BinDir() + "/duty_cycle",
               "--seconds", "30", "basic"},
              dir.File("rec.out"), dir.File("rec.err"));
  ASSERT_TRUE(WaitFor([&] { return SizeOf(trace) > 2000; }, 60));
  View v = StartView(dir, "view", {"view", "--follow", "--period", "0.2", trace, "--port", "0"});
  ASSERT_GT(v.port, 0) << v.proc->Err();
  json s;
  ASSERT_TRUE(WaitFor(
      [&] {
        s = GetJson(v.port, "/api/session");
        return State(s) == "live" && s["end"].get<uint64_t>() > 500'000'000;
      },
      60))
      << s.dump();
  rec.Kill(SIGKILL);
  rec.Wait(10);
  ASSERT_TRUE(WaitFor(
      [&] {
        s = GetJson(v.port, "/api/session");
        return State(s) == "lost";
      },
      60))
      << s.dump();
  const std::string lost = s["live"]["lost"];
  EXPECT_NE(lost.find("ended without closing it"), std::string::npos) << lost;
  EXPECT_NE(lost.find("is lost"), std::string::npos) << lost;
  EXPECT_GT(s["end"].get<uint64_t>(), 500'000'000u);
  EXPECT_GT(s["rows"].size(), 0u);
  EXPECT_TRUE(GetJson(v.port, "/api/timeline?px=100").is_object());
}

}  // namespace
}  // namespace parmon::testing
