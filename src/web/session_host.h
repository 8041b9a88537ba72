// web::SessionHost: the web UI of every session in a collector's store, for `parmon serve
// --http` (docs/web.md, docs/http-api.md): a session list at `/` and `/api/sessions`, and each
// session's page and JSON API under `/s/<session>/` (the page asks for `api/...` relative to
// itself, so it works under any prefix).
//
// Design. The host reads the store from disk only (live/store_list.h: the files and the
// collector's sidecars, which say when a stream is complete), never the collector's in-memory
// state, and runs on the HTTP server's threads: indexing a session never runs on the
// collector's io thread, so the collector takes sessions at full rate while a browser waits
// for a big one. A session is indexed on the first request of its API (lazily), by the code
// `parmon view` uses: a complete session as a stored trace (StoredView, served --partial, its
// damage listed), a session still being recorded as `parmon view --follow` does (LiveView over
// the store's file or rank directory, ended when the collector says every stream, and every
// rank of a per-rank session, is complete). At most max_sessions are held at once; the least
// recently used is dropped before another is opened (memory bounded by max_sessions indexes),
// and is indexed again on its next request. A stored session whose files changed since it was
// indexed (a new recording under its name) is indexed again.
//
// Thread safety: Handle may run on any number of threads at once. One mutex guards the table of
// held sessions (held only for lookups); each session has its own mutex held while it is
// indexed, so requests for it wait for that index while others are answered.
#ifndef PARMON_SRC_WEB_SESSION_HOST_H_
#define PARMON_SRC_WEB_SESSION_HOST_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/status.h"
#include "live/store_list.h"
#include "live_view/follow.h"
#include "web/api.h"

namespace parmon::web {

constexpr size_t kDefaultHttpSessions = 4;

struct SessionHostOptions {
  std::string store;
  size_t max_sessions = kDefaultHttpSessions;  // indexes held at once (at least 1)
  // Non-empty: every path starts with this (e.g. "/<token>"), anything else is a 403.
  std::string prefix;
};

// Indexes a complete session (a trace file or per-rank directory).
using OpenStoredFn =
    std::function<StatusOr<std::unique_ptr<ServedSession>>(const std::string& path)>;
// Follows a session still being recorded: the name the page shows, and what to follow.
using OpenLiveFn = std::function<StatusOr<std::unique_ptr<ServedSession>>(
    const std::string& name,
    std::function<StatusOr<live_view::LiveSource>()> source)>;

class SessionHost {
 public:
  SessionHost(SessionHostOptions options, OpenStoredFn open_stored, OpenLiveFn open_live);
  ~SessionHost();
  // Answers one GET (thread-safe).
  ApiResponse Handle(std::string_view target);
  // Sessions indexed so far (first ones and again after being dropped), and held now.
  uint64_t opens() const;
  size_t held() const;

 private:
  struct Slot;
  struct Listed;  // what the list shows of a session, cached by its files' signature
  ApiResponse SessionPage(std::string_view rest);
  ApiResponse SessionsJson();
  ApiResponse SessionsHtml();
  // The session's served view, indexed now if it is not held; null with *error otherwise.
  std::shared_ptr<ServedSession> Get(const live::StoredSession& s, ApiResponse* error);
  // Drops the least recently used held sessions (but `keep`) until at most `max` are held.
  void Evict(size_t max, const std::string& keep);
  Listed Describe(const live::StoredSession& s);

  SessionHostOptions options_;
  OpenStoredFn open_stored_;
  OpenLiveFn open_live_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Slot>> slots_;
  std::map<std::string, std::shared_ptr<Listed>> listed_;
  uint64_t tick_ = 0;
  uint64_t opens_ = 0;
};

// The collector's live session `name` in `store` as a source to follow: the store's file (or
// rank directory), complete (and its writer gone) when the collector's sidecars say so.
live_view::LiveSource StoreSource(const std::string& store, const std::string& name);

}  // namespace parmon::web

#endif  // PARMON_SRC_WEB_SESSION_HOST_H_
