// What every exporter shares: the window as a merge filter, a buffered output file, JSON string
// escaping, the balancing of region nesting inside a window, message numbering for flows, and
// display names of processes and threads.
//
// Memory: every helper here is bounded by the session's shape (locations, open regions per
// location, (sender, receiver, communicator, tag) keys), never by its event count: the exporters
// stream.
#ifndef PARMON_SRC_EXPORT_EXPORT_COMMON_H_
#define PARMON_SRC_EXPORT_EXPORT_COMMON_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "export/export.h"
#include "format/event.h"
#include "model/merge.h"
#include "model/session.h"

namespace parmon::exporter {

// The merge filter of options' window (times from the session start) on the aligned clock.
model::MergeFilter WindowFilter(const model::Session& session, const ExportOptions& options);

// An output file written through a 1 MiB buffer.
class OutFile {
 public:
  OutFile() = default;
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;
  ~OutFile();
  Status Open(const std::string& path);
  void Write(std::string_view s) {
    buf_.append(s);
    if (buf_.size() >= (1u << 20))
      Drain();
  }
  std::string& buffer() { return buf_; }  // append, then call Maybe()
  void Maybe() {
    if (buf_.size() >= (1u << 20))
      Drain();
  }
  // Writes what is buffered and closes: the first write error, if any.
  Status Close();

 private:
  void Drain();
  FILE* f_ = nullptr;
  std::string path_;
  std::string buf_;
  bool failed_ = false;
};

// s as a JSON string (quotes included); bytes that are not UTF-8 become \xNN (base/utf8.h).
void AppendJsonString(std::string* out, std::string_view s);
// s as one CSV field (quoted when it holds a comma, quote or line break).
void AppendCsvField(std::string* out, std::string_view s);

// A region or MPI call as the nesting sees it: the string id, tagged with its kind.
struct Frame {
  uint32_t name = 0;
  bool mpi = false;
  bool operator==(const Frame&) const = default;
};

// Region and MPI-call nesting per location, so that a window (or a thread killed mid-region)
// still yields well-nested enter/leave pairs: a leave whose enter is not open is dropped, a
// leave of a frame below the top first closes the frames above it, and Close() ends what is
// still open.
class Nesting {
 public:
  // Returns false when the leave has no open enter (drop it). Otherwise calls
  // close(frame) for each frame above it first, then for the frame itself.
  template <class Fn>
  bool Leave(uint32_t location, Frame f, Fn&& close) {
    auto& st = stacks_[location];
    size_t i = st.size();
    while (i > 0 && !(st[i - 1] == f))
      --i;
    if (i == 0)
      return false;
    while (st.size() >= i) {
      close(st.back());
      st.pop_back();
    }
    return true;
  }
  void Enter(uint32_t location, Frame f) { stacks_[location].push_back(f); }
  // close(location, frame) for every open frame, innermost first.
  template <class Fn>
  void CloseAll(Fn&& close) {
    for (auto& [loc, st] : stacks_)
      while (!st.empty()) {
        close(loc, st.back());
        st.pop_back();
      }
  }

 private:
  std::unordered_map<uint32_t, std::vector<Frame>> stacks_;
};

// Numbers point-to-point messages so that both ends find the same id: the k-th send from A to B
// on (comm, tag) and the k-th receive on B from A on (comm, tag) (MPI's non-overtaking rule;
// receives are taken in completion order, which is their posting order for all but wildcard
// receives overtaking each other).
class MessageIds {
 public:
  uint64_t Send(int64_t from, int64_t to, uint64_t comm, uint64_t tag) {
    return Id(from, to, comm, tag, sends_[{from, to, comm, tag}]++);
  }
  uint64_t Recv(int64_t from, int64_t to, uint64_t comm, uint64_t tag) {
    return Id(from, to, comm, tag, recvs_[{from, to, comm, tag}]++);
  }

 private:
  using Key = std::tuple<int64_t, int64_t, uint64_t, uint64_t>;
  // A 53-bit hash (exact in a JavaScript number).
  static uint64_t Id(int64_t from, int64_t to, uint64_t comm, uint64_t tag, uint64_t k);
  std::map<Key, uint64_t> sends_, recvs_;
};

// A location's pid, tid, rank and name, looked up in the session once (the session's lookups
// are map searches; the exporters print them on every event).
class LocationCache {
 public:
  struct Info {
    uint32_t pid = 0;
    uint32_t tid = 0;
    int64_t rank = -1;
    std::string name;
  };
  explicit LocationCache(const model::Session& session) : session_(session) {}
  const Info& Of(uint32_t location) {
    if (last_ && last_id_ == location)
      return *last_;
    auto [it, added] = infos_.try_emplace(location);
    if (added)
      it->second = {session_.PidOf(location), session_.TidOf(location), session_.RankOf(location),
                    std::string(session_.NameOf(location))};
    last_id_ = location;
    last_ = &it->second;
    return *last_;
  }

 private:
  const model::Session& session_;
  std::unordered_map<uint32_t, Info> infos_;  // node-based: last_ stays valid
  uint32_t last_id_ = 0;
  const Info* last_ = nullptr;
};

// "rank 3 (pid 1234)" / "pid 1234: command" / "pid 1234".
std::string ProcessLabel(const model::Session& session, uint32_t location);
// The thread's name, or "thread <tid>".
std::string ThreadLabel(const model::Session& session, uint32_t location);
// Names of string ids (regions, MPI functions, counters, markers).
inline std::string NameOf(const model::Session& session, uint64_t id) {
  return session.definitions().Name(static_cast<uint32_t>(id));
}

}  // namespace parmon::exporter

#endif  // PARMON_SRC_EXPORT_EXPORT_COMMON_H_
