#include "live/report_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace parmon::testing {
namespace {

using nlohmann::json;

std::map<std::string, const json*> ById(const json& array, const std::vector<std::string>& keys) {
  std::map<std::string, const json*> out;
  for (const auto& x : array) {
    std::string k;
    for (const auto& key : keys)
      k += x.value(key, json()).dump() + "|";
    out[k] = &x;
  }
  return out;
}

}  // namespace

// Per-interval rows of sampled quantities are spread over fine intervals by the collector and
// added up, so their rounding may differ by a few ns per fine interval (engine.h, SnapshotUntil);
// everything else must be equal.
void ExpectSameReport(const json& live, const json& post, const std::string& path, bool in_rows) {
  if (in_rows && live.is_number() && post.is_number()) {
    const double a = live.get<double>(), b = post.get<double>();
    EXPECT_LE(std::fabs(a - b), std::max(2000.0, 1e-4 * std::fabs(b))) << path;
    return;
  }
  ASSERT_EQ(live.type(), post.type()) << path << ": " << live.dump() << " vs " << post.dump();
  if (live.is_object()) {
    for (auto it = post.begin(); it != post.end(); ++it) {
      ASSERT_TRUE(live.contains(it.key())) << path << "." << it.key();
      // cpu_account's queued_beside_idle_ns is summed from those per-interval rows too.
      ExpectSameReport(live[it.key()], it.value(), path + "." + it.key(),
                       in_rows || it.key() == "intervals" || it.key() == "queued_beside_idle_ns");
    }
    EXPECT_EQ(live.size(), post.size()) << path;
  } else if (live.is_array()) {
    ASSERT_EQ(live.size(), post.size()) << path;
    for (size_t i = 0; i < live.size(); ++i)
      ExpectSameReport(live[i], post[i], path + "[" + std::to_string(i) + "]", in_rows);
  } else {
    EXPECT_EQ(live, post) << path;
  }
}

// A snapshot taken during the run is a prefix of the final report: nothing exceeds it, and each
// count is at least the previous snapshot's.
void ExpectPrefix(const json& snap, const json& prev, const json& fin) {
  const auto& s = snap["summary"];
  EXPECT_LE(s["events"].get<uint64_t>(), fin["summary"]["events"].get<uint64_t>());
  EXPECT_LE(s["duration_ns"].get<uint64_t>(), fin["summary"]["duration_ns"].get<uint64_t>());
  if (!prev.is_null()) {
    EXPECT_GE(s["events"].get<uint64_t>(), prev["summary"]["events"].get<uint64_t>());
    EXPECT_GE(s["duration_ns"].get<uint64_t>(), prev["summary"]["duration_ns"].get<uint64_t>());
  }
  auto final_locs = ById(fin["locations"], {"id"});
  auto prev_locs = prev.is_null() ? decltype(final_locs){} : ById(prev["locations"], {"id"});
  for (const auto& [id, l] : ById(snap["locations"], {"id"})) {
    ASSERT_TRUE(final_locs.count(id)) << "location " << id << " is not in the final report";
    const json& f = *final_locs[id];
    for (const char* k : {"events", "messages_sent", "bytes_sent", "messages_received",
                          "bytes_received", "late_sender_ns", "late_receiver_ns"}) {
      EXPECT_LE((*l)[k].get<uint64_t>(), f[k].get<uint64_t>()) << id << " " << k;
      if (prev_locs.count(id)) {
        EXPECT_GE((*l)[k].get<uint64_t>(), (*prev_locs[id])[k].get<uint64_t>()) << id << " " << k;
      }
    }
  }
  auto final_links = ById(fin["links"], {"kind", "from", "to", "channel"});
  auto prev_links = prev.is_null() ? decltype(final_links){}
                                   : ById(prev["links"], {"kind", "from", "to", "channel"});
  for (const auto& [id, l] : ById(snap["links"], {"kind", "from", "to", "channel"})) {
    if (!final_links.count(id) && (*l)["kind"] == "channel") {
      // A writer's bytes go to the readers of its channel in the shares they read (channels.cc):
      // bytes written before any read of them was recorded end at the channel (to 4294967295),
      // and while nothing has been read every reader seen so far gets an even share, so a link
      // to a reader that never reads any of them is gone at the end. The final report has that
      // writer's links on the same channel to its readers; together they carry at least what
      // this one did.
      uint64_t messages = 0, bytes = 0;
      bool any = false;
      for (const auto& f : fin["links"])
        if (f["kind"] == "channel" && f["from"] == (*l)["from"] &&
            f.value("channel", json()) == l->value("channel", json())) {
          any = true;
          messages += f["messages"].get<uint64_t>();
          bytes += f["bytes"].get<uint64_t>();
        }
      ASSERT_TRUE(any) << "link " << id << ": its writer has no link on that channel at the end";
      EXPECT_LE((*l)["messages"].get<uint64_t>(), messages) << id;
      EXPECT_LE((*l)["bytes"].get<uint64_t>(), bytes) << id;
      continue;
    }
    ASSERT_TRUE(final_links.count(id)) << "link " << id << " is not in the final report";
    for (const char* k : {"messages", "bytes"}) {
      EXPECT_LE((*l)[k].get<uint64_t>(), (*final_links[id])[k].get<uint64_t>()) << id << " " << k;
      if (prev_links.count(id)) {
        EXPECT_GE((*l)[k].get<uint64_t>(), (*prev_links[id])[k].get<uint64_t>()) << id << " " << k;
      }
    }
  }
  auto final_waits = ById(fin["wait_states"]["instances"], {"pattern", "location", "call"});
  for (const auto& [id, w] :
       ById(snap["wait_states"]["instances"], {"pattern", "location", "call"})) {
    ASSERT_TRUE(final_waits.count(id)) << "wait state " << id << " is not in the final report";
    EXPECT_LE((*w)["instances"].get<uint64_t>(), (*final_waits[id])["instances"].get<uint64_t>());
  }
}

}  // namespace parmon::testing
