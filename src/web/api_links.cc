// The communication answers of the JSON API (docs/http-api.md): the communication matrix of a
// time range (/api/matrix) and the process graph stepped interval by interval (/api/graph). Both
// sum the messages the index holds (those sent in the range, each with its wait as the report
// splits it; the index's per-link checkpoints make a range of millions of them cheap) and, for
// the graph's nodes, the state series: nothing is read from the trace again.
#include <algorithm>
#include <map>
#include <span>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "web/api.h"

namespace parmon::web {

namespace {

// i-th of the steps+1 edges cutting [t0, t1) in `steps` equal intervals.
uint64_t StepEdge(uint64_t t0, uint64_t t1, uint64_t steps, uint64_t i) {
  return t0 + static_cast<uint64_t>(static_cast<unsigned __int128>(t1 - t0) * i / steps);
}

// The step a time in [t0, t1) falls in.
uint64_t StepOf(uint64_t t0, uint64_t t1, uint64_t steps, uint64_t t) {
  const auto i = static_cast<uint64_t>(static_cast<unsigned __int128>(t - t0) * steps / (t1 - t0));
  uint64_t k = std::min(i, steps - 1);
  while (k + 1 < steps && StepEdge(t0, t1, steps, k + 1) <= t)  // rounding of the division
    ++k;
  while (k > 0 && StepEdge(t0, t1, steps, k) > t)
    --k;
  return k;
}

struct StepSums {
  std::vector<uint64_t> messages, bytes, wait;
};

}  // namespace

ApiResponse Api::Matrix(const Params& p) const {
  std::string error;
  uint64_t t0, t1;
  if (!RangeParams(p, index_.end() - index_.start(), &t0, &t1, &error))
    return ErrorResponse(400, error);
  const uint64_t origin = index_.start();
  const std::vector<LinkSum> links = index_.LinksIn(origin + t0, origin + t1);
  // The parties, in the execution barscope's order (the report's: by process, then thread).
  std::vector<uint32_t> parties;
  for (const LinkSum& k : links)
    parties.insert(parties.end(), {k.from, k.to});
  auto order = [this](uint32_t id) {
    auto it = row_of_id_.find(id);
    return it == row_of_id_.end() ? rows_.size() + id : it->second;
  };
  std::sort(parties.begin(), parties.end(),
            [&](uint32_t a, uint32_t b) { return order(a) < order(b); });
  parties.erase(std::unique(parties.begin(), parties.end()), parties.end());
  ApiResponse res;
  std::string& out = res.body;
  fmt::format_to(std::back_inserter(out), "{{\"t0\":{},\"t1\":{},\"rows\":[{}],\"cells\":[", t0, t1,
                 fmt::join(parties, ","));
  uint64_t messages = 0, bytes = 0, wait = 0;
  for (const LinkSum& k : links) {
    const uint64_t w = k.sender_wait_ns + k.receiver_wait_ns;
    fmt::format_to(std::back_inserter(out), "{}[{},{},{},{},{},{},{}]", &k == &links[0] ? "" : ",",
                   k.from, k.to, k.messages, k.bytes, w, k.sender_wait_ns, k.receiver_wait_ns);
    messages += k.messages;
    bytes += k.bytes;
    wait += w;
  }
  fmt::format_to(std::back_inserter(out),
                 "],\"totals\":{{\"messages\":{},\"bytes\":{},\"wait_ns\":{}}}}}", messages, bytes,
                 wait);
  return res;
}

ApiResponse Api::Graph(const Params& p) const {
  std::string error;
  uint64_t t0, t1, steps;
  if (!RangeParams(p, index_.end() - index_.start(), &t0, &t1, &error) ||
      !NumberParam(p, "steps", kDefaultSteps, 1, kMaxSteps, &steps, &error))
    return ErrorResponse(400, error);
  steps = std::min(steps, t1 - t0);  // at least 1 ns per step
  const uint64_t origin = index_.start();
  ApiResponse res;
  std::string& out = res.body;
  fmt::format_to(std::back_inserter(out), "{{\"t0\":{},\"t1\":{},\"steps\":{},\"bounds\":[", t0, t1,
                 steps);
  for (uint64_t i = 0; i <= steps; ++i)
    fmt::format_to(std::back_inserter(out), "{}{}", i ? "," : "", StepEdge(t0, t1, steps, i));
  out += "],\"nodes\":[";
  for (const Row& r : rows_) {
    fmt::format_to(std::back_inserter(out), "{}{{\"id\":{},\"states\":[",
                   &r == &rows_[0] ? "" : ",", r.id);
    StateNs prev{};
    if (r.indexed)
      prev = r.indexed->states.Cumulative(origin + t0);
    for (uint64_t i = 0; i < steps; ++i) {
      StateNs d{};
      if (r.indexed) {
        const StateNs next = r.indexed->states.Cumulative(origin + StepEdge(t0, t1, steps, i + 1));
        for (int s = 0; s < kStates; ++s)
          d[s] = next[s] - prev[s];
        prev = next;
      }
      fmt::format_to(std::back_inserter(out), "{}[{}]", i ? "," : "", fmt::join(d, ","));
    }
    out += "]}";
  }
  out += "],\"links\":[";
  // Per link and step: from the sums before each step's edge (index_.LinksBefore), or, for a
  // range with few messages, a pass over them.
  std::map<std::pair<uint32_t, uint32_t>, StepSums> links;
  auto step_sums = [&](uint32_t from, uint32_t to) -> StepSums& {
    StepSums& k = links[{from, to}];
    if (k.messages.empty()) {
      k.messages.assign(steps, 0);
      k.bytes.assign(steps, 0);
      k.wait.assign(steps, 0);
    }
    return k;
  };
  const std::span<const Message> sent = index_.SentIn(origin + t0, origin + t1);
  if (sent.size() <= index_.link_checkpoints().stride()) {
    for (const Message& m : sent) {
      StepSums& k = step_sums(m.from, m.to);
      const uint64_t i = StepOf(t0, t1, steps, m.send - origin);
      ++k.messages[i];
      k.bytes[i] += m.bytes;
      k.wait[i] += m.sender_wait_ns + m.receiver_wait_ns;
    }
  } else {
    std::vector<uint64_t> edges(steps + 1);
    for (uint64_t i = 0; i <= steps; ++i)
      edges[i] = origin + StepEdge(t0, t1, steps, i);
    const auto before = index_.LinksBefore(edges);
    for (size_t l = 0; l < index_.link_checkpoints().links().size(); ++l) {
      if (before[steps][l].messages == before[0][l].messages)
        continue;  // none in the range
      StepSums& k = step_sums(before[0][l].from, before[0][l].to);
      for (uint64_t i = 0; i < steps; ++i) {
        const LinkSum d = before[i + 1][l].Since(before[i][l]);
        k.messages[i] = d.messages;
        k.bytes[i] = d.bytes;
        k.wait[i] = d.sender_wait_ns + d.receiver_wait_ns;
      }
    }
  }
  bool first = true;
  for (const auto& [key, k] : links) {
    fmt::format_to(std::back_inserter(out),
                   "{}{{\"from\":{},\"to\":{},\"messages\":[{}],\"bytes\":[{}],\"wait_ns\":[{}]}}",
                   first ? "" : ",", key.first, key.second, fmt::join(k.messages, ","),
                   fmt::join(k.bytes, ","), fmt::join(k.wait, ","));
    first = false;
  }
  out += "]}";
  return res;
}

}  // namespace parmon::web
