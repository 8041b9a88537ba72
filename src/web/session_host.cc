// SessionHost (session_host.h): routing, the session list, and the held sessions.
#include "web/session_host.h"

#include <malloc.h>

#include <ctime>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/views.h"
#include "format/reader.h"
#include "live/protocol.h"
#include "web/ui_bundle.h"

namespace parmon::web {

using json = nlohmann::json;

struct SessionHost::Slot {
  std::mutex open_mu;  // held while the session is indexed
  // Under the host's mu_:
  std::shared_ptr<ServedSession> served;
  bool live = false;      // followed as it grows (kept until dropped)
  std::string signature;  // of its files when indexed (a stored one)
  uint64_t last_use = 0;
};

struct SessionHost::Listed {
  std::string signature;
  uint64_t events = 0;
  uint64_t start_realtime_ns = 0;
  bool readable = false, closed = false;
  std::vector<std::string> problems;
};

namespace {

std::string IsoTime(uint64_t realtime_ns) {
  if (realtime_ns == 0)
    return "";
  const time_t t = static_cast<time_t>(realtime_ns / 1'000'000'000);
  tm utc{};
  gmtime_r(&t, &utc);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::string Size(uint64_t bytes) {
  if (bytes >= (1u << 30))
    return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1u << 30));
  if (bytes >= (1u << 20))
    return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1u << 20));
  if (bytes >= (1u << 10))
    return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / (1u << 10));
  return fmt::format("{} B", bytes);
}

// The path of a target without its query.
std::string_view PathOf(std::string_view target) {
  return target.substr(0, target.find('?'));
}

}  // namespace

live_view::LiveSource StoreSource(const std::string& store, const std::string& name) {
  live_view::LiveSource source;
  auto s = live::FindStored(store, name);
  source.path = s ? s->path : fmt::format("{}/{}.ptrace", store, name);
  source.complete = [store, name] {
    auto now = live::FindStored(store, name);
    return !now || now->complete;  // a session removed from the store: nothing more will come
  };
  // The collector's word, not the recorder's pid: a recorder exits once the collector holds
  // every byte, which may be before the collector has marked the stream ended.
  source.writer_gone = source.complete;
  source.why_gone = [store, name] {
    auto now = live::FindStored(store, name);
    if (now && !now->lost.empty())  // the collector's own sentence
      return fmt::format("the collector says of {}: {}", name, now->lost);
    return fmt::format("the collector holds all of {}, but it was not closed cleanly", name);
  };
  return source;
}

SessionHost::SessionHost(SessionHostOptions options, OpenStoredFn open_stored, OpenLiveFn open_live)
    : options_(std::move(options)),
      open_stored_(std::move(open_stored)),
      open_live_(std::move(open_live)) {
  if (options_.max_sessions == 0)
    options_.max_sessions = 1;
}

SessionHost::~SessionHost() = default;

uint64_t SessionHost::opens() const {
  std::lock_guard lock(mu_);
  return opens_;
}

size_t SessionHost::held() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [name, slot] : slots_)
    n += slot->served != nullptr;
  return n;
}

ApiResponse SessionHost::Handle(std::string_view target) {
  if (!options_.prefix.empty()) {
    const std::string_view head = target.substr(0, options_.prefix.size());
    const char next = target.size() > head.size() ? target[head.size()] : '/';
    if (head.size() != options_.prefix.size() || !live::ConstantTimeEqual(head, options_.prefix) ||
        (next != '/' && next != '?'))
      return ErrorResponse(403, "This server needs its token in the path (the URL it printed).");
    target.remove_prefix(options_.prefix.size());
    if (PathOf(target).empty()) {  // "/TOKEN": the list is at "/TOKEN/"
      ApiResponse r = ErrorResponse(301, "The session list is one level down.");
      r.location = options_.prefix.substr(options_.prefix.rfind('/') + 1) + "/";
      return r;
    }
  }
  const std::string_view path = PathOf(target);
  if (path == "/" || path == "/index.html")
    return SessionsHtml();
  if (path == "/api/sessions")
    return SessionsJson();
  if (path == "/app.js")
    return UiFile(path);
  if (path.substr(0, 3) == "/s/")
    return SessionPage(target.substr(3));
  return ErrorResponse(404, "There is nothing at this path.");
}

// rest: what follows "/s/": "<session>/..." with the query.
ApiResponse SessionHost::SessionPage(std::string_view rest) {
  const size_t slash = PathOf(rest).find('/');
  const std::string name(rest.substr(0, std::min(slash, rest.find('?'))));
  if (!live::ValidSessionName(name))
    return ErrorResponse(400,
                         "A session name is 1 to 128 of A-Z a-z 0-9 . _ - and does not "
                         "start with a dot.");
  auto stored = live::FindStored(options_.store, name);
  if (!stored)
    return ErrorResponse(404, fmt::format("The store holds no session named {}.", name));
  if (slash == std::string_view::npos) {  // "/s/NAME": its page is "/s/NAME/"
    ApiResponse r;
    r.status = 301;
    r.content_type = "text/plain";
    r.location = name + "/";
    return r;
  }
  const std::string_view below = rest.substr(slash);  // "/api/...", "/", "/app.js"
  if (PathOf(below).substr(0, 5) != "/api/")
    return UiFile(PathOf(below));
  ApiResponse error;
  std::shared_ptr<ServedSession> served = Get(*stored, &error);
  if (!served)
    return error;
  return served->Handle(below);
}

std::shared_ptr<ServedSession> SessionHost::Get(const live::StoredSession& s, ApiResponse* error) {
  const std::string signature = s.signature();
  std::shared_ptr<Slot> slot;
  auto current = [&]() -> std::shared_ptr<ServedSession> {  // under mu_
    if (slot->served && (slot->live || slot->signature == signature)) {
      slot->last_use = ++tick_;
      return slot->served;
    }
    return nullptr;
  };
  {
    std::lock_guard lock(mu_);
    auto& held = slots_[s.name];
    if (!held)
      held = std::make_shared<Slot>();
    slot = held;
    if (auto served = current())
      return served;
  }
  std::lock_guard opening(slot->open_mu);
  std::shared_ptr<ServedSession> stale;
  {
    std::lock_guard lock(mu_);
    if (auto served = current())
      return served;  // indexed by another request meanwhile
    stale = std::move(slot->served);
  }
  stale.reset();
  Evict(options_.max_sessions - 1, s.name);  // room for this one, before it takes memory
  StatusOr<std::unique_ptr<ServedSession>> opened =
      s.complete ? open_stored_(s.path)
                 : open_live_(s.name, [store = options_.store, name = s.name]() {
                     return StatusOr<live_view::LiveSource>(StoreSource(store, name));
                   });
  if (!opened.ok()) {
    *error = ErrorResponse(
        422, fmt::format("Session {} cannot be shown: {}.", s.name, opened.status().message()));
    return nullptr;
  }
  std::shared_ptr<ServedSession> served = std::move(*opened);
  {
    std::lock_guard lock(mu_);
    slot->served = served;
    slot->live = !s.complete;
    slot->signature = signature;
    slot->last_use = ++tick_;
    ++opens_;
  }
  Evict(options_.max_sessions, s.name);  // another request may have indexed one meanwhile
  return served;
}

void SessionHost::Evict(size_t max, const std::string& keep) {
  std::vector<std::shared_ptr<ServedSession>> dropped;  // destroyed outside the lock
  {
    std::lock_guard lock(mu_);
    for (;;) {
      size_t held = 0;
      Slot* oldest = nullptr;
      for (auto& [name, slot] : slots_) {
        if (!slot->served)
          continue;
        ++held;
        if (name != keep && (!oldest || slot->last_use < oldest->last_use))
          oldest = slot.get();
      }
      if (held <= max || !oldest)
        break;
      dropped.push_back(std::move(oldest->served));
      oldest->served = nullptr;
    }
  }
  if (dropped.empty())
    return;
  dropped.clear();
  // The index was built on whichever HTTP thread asked first, in that thread's malloc arena:
  // without a trim, freed indexes stay in up to one arena per thread and the process keeps the
  // largest of them per thread.
  malloc_trim(0);
}

SessionHost::Listed SessionHost::Describe(const live::StoredSession& s) {
  const std::string signature = s.signature();
  {
    std::lock_guard lock(mu_);
    auto it = listed_.find(s.name);
    if (it != listed_.end() && it->second->signature == signature)
      return *it->second;
  }
  auto listed = std::make_shared<Listed>();
  listed->signature = signature;
  // The chunk index only (no event is decoded): the count of events in intact chunks, the
  // session's wall-clock start and the damage found so far.
  auto reader = format::TraceReader::Open(s.path);
  if (reader.ok()) {
    listed->readable = true;
    listed->events = (*reader)->total_events();
    listed->start_realtime_ns = (*reader)->metadata().session.start_realtime_ns;
    listed->closed = (*reader)->closed_cleanly();
    for (const format::Problem& p : (*reader)->problems())
      if (!p.harmless && !(p.tail && !s.complete))  // a live file's unfinished tail is no damage
        listed->problems.push_back(p.message);
  } else if (s.complete || s.bytes() > 0) {
    listed->problems.push_back(std::string(reader.status().message()));
  }
  std::lock_guard lock(mu_);
  listed_[s.name] = listed;
  return *listed;
}

ApiResponse SessionHost::SessionsJson() {
  json sessions = json::array();
  for (const live::StoredSession& s : live::ListStore(options_.store)) {
    const Listed l = Describe(s);
    bool held = false;
    {
      std::lock_guard lock(mu_);
      auto it = slots_.find(s.name);
      held = it != slots_.end() && it->second->served;
    }
    const bool damaged = s.complete && (!l.readable || !l.closed || !l.problems.empty());
    json j = {{"name", s.name},
              {"kind", s.per_rank ? "ranks" : "file"},
              {"state", !s.complete       ? "live"
                        : !s.lost.empty() ? "lost"
                        : damaged         ? "damaged"
                                          : "ended"},
              {"bytes", s.bytes()},
              {"url", "s/" + s.name + "/"},
              {"indexed", held},
              {"problems", l.problems}};
    if (!s.lost.empty())
      j["lost"] = s.lost;
    if (l.readable)
      j["events"] = l.events;
    if (l.start_realtime_ns) {
      j["start_realtime_ns"] = l.start_realtime_ns;
      j["start"] = IsoTime(l.start_realtime_ns);
    }
    if (s.per_rank) {
      j["ranks"] = s.streams.size();
      j["ranks_expected"] = s.ranks_expected;
    }
    sessions.push_back(std::move(j));
  }
  json out = {{"store", options_.store},
              {"max_indexed", options_.max_sessions},
              {"indexed", held()},
              {"sessions", std::move(sessions)}};
  return ApiResponse{200, "application/json", out.dump(), ""};
}

ApiResponse SessionHost::SessionsHtml() {
  const json list = json::parse(SessionsJson().body);
  std::string rows;
  for (const json& s : list["sessions"]) {
    const std::string state = s["state"].get<std::string>();
    std::string kind = s["kind"] == "ranks" ? fmt::format("{} ranks", s["ranks"].get<uint64_t>())
                                            : std::string("one file");
    if (s["kind"] == "ranks" && s["ranks_expected"].get<int>() > 0)
      kind += fmt::format(" of {}", s["ranks_expected"].get<int>());
    std::string problems;
    if (s.contains("lost"))
      problems +=
          "<div class=\"problem\">" + analysis::HtmlEscape(s["lost"].get<std::string>()) + "</div>";
    for (const json& p : s["problems"])
      problems += "<div class=\"problem\">" + analysis::HtmlEscape(p.get<std::string>()) + "</div>";
    rows += fmt::format(
        "<tr data-session=\"{0}\" data-state=\"{1}\"><td><a href=\"{2}\">{0}</a></td><td>{3}</td>"
        "<td class=\"{1}\">{1}{4}</td><td>{5}</td><td>{6}</td><td>{7}</td></tr>\n",
        analysis::HtmlEscape(s["name"].get<std::string>()), state,
        analysis::HtmlEscape(s["url"].get<std::string>()), kind, problems,
        Size(s["bytes"].get<uint64_t>()),
        s.contains("events") ? fmt::format("{}", s["events"].get<uint64_t>()) : "",
        s.contains("start") ? s["start"].get<std::string>() : "");
  }
  ApiResponse r;
  r.content_type = "text/html; charset=utf-8";
  r.body = fmt::format(
      "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>parmon serve: "
      "sessions</title><link rel=\"icon\" href=\"data:,\"><style>body{{font:14px sans-serif;"
      "margin:1em}}table{{border-collapse:collapse}}td,th{{padding:3px 10px;border-bottom:1px "
      "solid #ddd;text-align:left;vertical-align:top}}.live{{color:#2e9d3e;font-weight:bold}}"
      ".damaged,.lost{{color:#c0392b}}.problem{{font-size:12px;max-width:50em}}</style></"
      "head><body>"
      "<h1>Sessions</h1><p>{} sessions in the store {}; each is indexed when first opened, at "
      "most {} at once (<a href=\"api/sessions\">api/sessions</a>). Reload for the current "
      "states.</p><table id=\"sessions\"><thead><tr><th>session</th><th>kind</th><th>state</th>"
      "<th>size</th><th>events</th><th>start (UTC)</th></tr></thead><tbody>\n{}</tbody></table>"
      "</body></html>\n",
      list["sessions"].size(), analysis::HtmlEscape(options_.store), options_.max_sessions, rows);
  return r;
}

}  // namespace parmon::web
