// The parallel report (parallel_report.h): the split of the streams, the batches of merged
// events that processes 1..K-1 send, and process 0's merge of them into the engine.
#include "parallel/parallel_report.h"

#include <dlfcn.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "model/merge.h"

namespace parmon::parallel {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = getenv(name);
  if (!v || !*v)
    return fallback;
  char* end = nullptr;
  long n = strtol(v, &end, 10);
  return *end || n < 0 || n > 1 << 24 ? fallback : static_cast<int>(n);
}

// --- batches -------------------------------------------------------------------------------------
// A batch is one message from a sending process to process 0:
//   header   u32 magic, u32 flags (kLast, kError), u32 records, u32 0
//   records  u64 ts, u32 stream, u32 location, u16 kind, u8 source, u8 nargs | kHasPayload,
//            nargs x u64 args, [u32 length, payload bytes]
//   kLast:   then the reader's problems found while decoding (u32 count; each u64 offset,
//            i64 events lost, u8 tail, u8 harmless, u8 has location, u32 location, u32 length,
//            message bytes)
//   kError:  instead of records, u32 length and one sentence (the sender could not go on)
// Times and time arguments are already on rank 0's clock (the sender's merge aligned them).
constexpr uint32_t kMagic = 0x31425250;  // "PRB1"
constexpr uint32_t kLast = 1, kError = 2;
constexpr size_t kHeaderBytes = 16;
constexpr size_t kRecordBytes = 20;  // without args and payload
constexpr uint8_t kHasPayload = 0x80;
// A batch is at most this long: large enough that a message costs little per event (about 17 k
// events of an MPI trace), small enough that two per sender stay in the caches' reach.
constexpr size_t kBatchBytes = 1 << 20;
// Batches in flight per sender (its buffers, and the receives process 0 keeps posted): a sender
// runs up to this many batches ahead, so that a process descheduled for a while on a busy
// machine does not stall the other at once (2 batches: 0.54x on the 4,096-rank session at load
// 9-12, the first version of bench/parallel_report.sh's table).
constexpr int kDepth = 8;
// A payload longer than this does not fit a batch with its record.
constexpr size_t kMaxPayload = kBatchBytes - kHeaderBytes - kRecordBytes - 8 * format::kMaxArgs - 4;

template <typename T>
void Put(std::vector<uint8_t>& b, T v) {
  size_t at = b.size();
  b.resize(at + sizeof v);
  memcpy(b.data() + at, &v, sizeof v);
}

// Reads values from a received batch, checking its length.
struct Cursor {
  const uint8_t* p;
  const uint8_t* end;
  template <typename T>
  bool Get(T* v) {
    if (static_cast<size_t>(end - p) < sizeof *v)
      return false;
    memcpy(v, p, sizeof *v);
    p += sizeof *v;
    return true;
  }
};

// The streams each process reads: every location's streams go to one process; locations in
// stream order (a rank file's streams are consecutive) are cut into blocks of about equal
// events, one per sending process (1..K-1), so that a process reads whole rank files but for
// the two ends of its block.
std::vector<std::set<uint32_t>> SplitLocations(const model::Session& session, int senders) {
  const auto& streams = session.streams();
  std::map<uint32_t, std::pair<size_t, uint64_t>> by_location;  // id -> first stream, events
  for (size_t i = 0; i < streams.size(); ++i) {
    if (streams[i].source == format::Source::kDefinitions)
      continue;
    auto [it, inserted] = by_location.try_emplace(streams[i].location, i, 0);
    it->second.second += streams[i].events;
  }
  std::vector<std::pair<size_t, uint32_t>> order;  // (first stream, location)
  uint64_t total = 0;
  for (const auto& [id, fe] : by_location) {
    order.emplace_back(fe.first, id);
    total += fe.second;
  }
  std::sort(order.begin(), order.end());
  std::vector<std::set<uint32_t>> share(static_cast<size_t>(senders));
  uint64_t before = 0;
  for (const auto& [first, id] : order) {
    const uint64_t events = by_location[id].second;
    // The block of the location's middle event.
    const uint64_t mid = before + events / 2;
    size_t who = total ? static_cast<size_t>(mid * static_cast<uint64_t>(senders) / total) : 0;
    share[std::min(who, share.size() - 1)].insert(id);
    before += events;
  }
  return share;
}

// --- sending processes -----------------------------------------------------------------------
class Sender {
 public:
  explicit Sender(const Group& g) : g_(g) {
    for (auto& b : buf_)
      b.reserve(kBatchBytes);
    Start();
  }
  void Add(const format::Event& e, model::StreamIndex s) {
    const size_t payload = e.payload.size();
    const size_t need = kRecordBytes + 8 * e.nargs + (payload ? 4 + payload : 0);
    if (buf_[cur_].size() + need > kBatchBytes) {
      if (payload > kMaxPayload) {
        if (error_.empty())
          error_ = fmt::format("an event of {} bytes is too long for the parallel report", payload);
        return;
      }
      Flush(0);
    }
    std::vector<uint8_t>& b = buf_[cur_];
    const size_t at = b.size();
    b.resize(at + need);
    uint8_t* p = b.data() + at;
    memcpy(p, &e.ts, 8);
    memcpy(p + 8, &s, 4);
    memcpy(p + 12, &e.location, 4);
    memcpy(p + 16, &e.kind, 2);
    p[18] = static_cast<uint8_t>(e.source);
    p[19] = static_cast<uint8_t>(e.nargs | (payload ? kHasPayload : 0));
    memcpy(p + kRecordBytes, e.args, 8 * e.nargs);
    if (payload) {
      const auto len = static_cast<uint32_t>(payload);
      memcpy(p + kRecordBytes + 8 * e.nargs, &len, 4);
      memcpy(p + kRecordBytes + 8 * e.nargs + 4, e.payload.data(), payload);
    }
    ++records_;
  }
  // The last batch, with the problems the reader found since problems_at_open.
  void Finish(const format::TraceReader& reader, size_t problems_at_open) {
    if (!error_.empty())
      return Fail(error_);
    std::vector<uint8_t>& b = buf_[cur_];
    const auto& problems = reader.problems();
    Put<uint32_t>(
        b, static_cast<uint32_t>(problems.size() - std::min(problems.size(), problems_at_open)));
    for (size_t i = problems_at_open; i < problems.size(); ++i) {
      const format::Problem& pr = problems[i];
      Put<uint64_t>(b, pr.offset);
      Put<int64_t>(b, pr.events_lost);
      Put<uint8_t>(b, pr.tail);
      Put<uint8_t>(b, pr.harmless);
      Put<uint8_t>(b, pr.location.has_value());
      Put<uint32_t>(b, pr.location.value_or(0));
      const std::string msg = pr.message.substr(0, 4096);
      Put<uint32_t>(b, static_cast<uint32_t>(msg.size()));
      b.insert(b.end(), msg.begin(), msg.end());
    }
    Flush(kLast);
    Drain();
  }
  // An error instead of (the rest of) the events: process 0 says it and every process ends.
  void Fail(const std::string& why) {
    Drain();
    buf_[cur_].clear();
    records_ = 0;
    Start();
    const std::string msg = why.substr(0, 4096);
    Put<uint32_t>(buf_[cur_], static_cast<uint32_t>(msg.size()));
    buf_[cur_].insert(buf_[cur_].end(), msg.begin(), msg.end());
    Flush(kError);
    Drain();
  }

 private:
  void Start() {
    std::vector<uint8_t>& b = buf_[cur_];
    b.clear();
    Put<uint32_t>(b, kMagic);
    Put<uint32_t>(b, 0);
    Put<uint32_t>(b, 0);
    Put<uint32_t>(b, 0);
    records_ = 0;
  }
  // Sends the current batch and starts the next in the other buffer (whose send must be done).
  void Flush(uint32_t flags) {
    std::vector<uint8_t>& b = buf_[cur_];
    memcpy(b.data() + 4, &flags, 4);
    memcpy(b.data() + 8, &records_, 4);
    req_[cur_] = g_.transport().isend(b.data(), b.size(), 0);
    if (!req_[cur_]) {
      fmt::print(stderr, "parmon report: process {}: MPI_Isend failed\n", g_.rank());
      g_.Abort(1);
    }
    cur_ = (cur_ + 1) % kDepth;
    Wait(cur_);
    Start();
  }
  void Wait(int i) {
    if (req_[i] && g_.transport().wait(req_[i]) < 0) {
      fmt::print(stderr, "parmon report: process {}: sending to process 0 failed\n", g_.rank());
      g_.Abort(1);
    }
    req_[i] = nullptr;
  }
  void Drain() {
    for (int i = 0; i < kDepth; ++i)
      Wait(i);
  }

  const Group& g_;
  std::array<std::vector<uint8_t>, kDepth> buf_;
  std::array<void*, kDepth> req_ = {};
  int cur_ = 0;
  uint32_t records_ = 0;
  std::string error_;
};

// --- process 0 -----------------------------------------------------------------------------------
// One sending process's events, in its merge's order, received in batches into kDepth buffers (the
// next batch arrives while this one is consumed).
class Input {
 public:
  Input(const Group& g, int from) : g_(g), from_(from) {
    for (int i = 0; i < kDepth; ++i) {
      buf_[i].resize(kBatchBytes);
      Post(i);
    }
  }
  // The receive posted for a batch after the last is cancelled.
  ~Input() {
    for (void* r : req_)
      g_.transport().cancel(r);
  }
  Input(const Input&) = delete;
  Input& operator=(const Input&) = delete;
  // Moves to the next record: false at the end of this sender's events (or an error).
  bool Next() {
    while (left_ == 0) {
      if (last_ || !error_.empty() || !Receive()) {
        done_ = true;
        return false;
      }
    }
    --left_;
    uint8_t nargs_flags = 0;
    if (!cur_.Get(&ts) || !cur_.Get(&stream) || !cur_.Get(&location) || !cur_.Get(&kind) ||
        !cur_.Get(&source) || !cur_.Get(&nargs_flags))
      return Bad("a record is cut short");
    nargs = nargs_flags & 0x7f;
    if (nargs > format::kMaxArgs)
      return Bad("a record has too many arguments");
    args = cur_.p;
    if (static_cast<size_t>(cur_.end - cur_.p) < 8u * nargs)
      return Bad("a record's arguments are cut short");
    cur_.p += 8 * nargs;
    payload = {};
    if (nargs_flags & kHasPayload) {
      uint32_t len = 0;
      if (!cur_.Get(&len) || static_cast<size_t>(cur_.end - cur_.p) < len)
        return Bad("a record's payload is cut short");
      payload = std::string_view(reinterpret_cast<const char*>(cur_.p), len);
      cur_.p += len;
    }
    return true;
  }
  const std::string& error() const { return error_; }
  // The sender's events have all been taken (or an error ended them).
  bool done() const { return done_; }
  const std::vector<format::Problem>& problems() const { return problems_; }

  // The current record.
  uint64_t ts = 0;
  uint32_t stream = 0, location = 0;
  uint16_t kind = 0;
  uint8_t source = 0, nargs = 0;
  const uint8_t* args = nullptr;
  std::string_view payload;

 private:
  void Post(int i) {
    req_[i] = g_.transport().irecv(buf_[i].data(), buf_[i].size(), from_);
    if (!req_[i]) {
      fmt::print(stderr, "parmon report: MPI_Irecv failed\n");
      g_.Abort(1);
    }
  }
  // The next batch (in the buffer after the one just consumed, which is posted again).
  bool Receive() {
    if (started_) {
      Post(which_);
      which_ = (which_ + 1) % kDepth;
    }
    started_ = true;
    long long got = g_.transport().wait(req_[which_]);
    req_[which_] = nullptr;
    if (got < 0)
      return Bad("receiving failed");
    cur_ = {buf_[which_].data(), buf_[which_].data() + got};
    uint32_t magic = 0, flags = 0, records = 0, zero = 0;
    if (!cur_.Get(&magic) || !cur_.Get(&flags) || !cur_.Get(&records) || !cur_.Get(&zero) ||
        magic != kMagic)
      return Bad("a batch has no valid header");
    if (flags & kError) {
      uint32_t len = 0;
      if (!cur_.Get(&len) || static_cast<size_t>(cur_.end - cur_.p) < len)
        return Bad("its error message is cut short");
      error_ = fmt::format("process {}: {}", from_,
                           std::string(reinterpret_cast<const char*>(cur_.p), len));
      return false;
    }
    left_ = records;
    if (flags & kLast) {
      last_ = true;
      // The problems follow the records: read them now, from a cursor past the records.
      Cursor c = cur_;
      if (!SkipRecords(&c, records) || !ReadProblems(&c))
        return Bad("its last batch is malformed");
    }
    return true;
  }
  bool SkipRecords(Cursor* c, uint32_t records) {
    for (uint32_t i = 0; i < records; ++i) {
      if (static_cast<size_t>(c->end - c->p) < kRecordBytes)
        return false;
      const uint8_t nf = c->p[19];
      c->p += kRecordBytes;
      if (static_cast<size_t>(c->end - c->p) < 8u * (nf & 0x7f))
        return false;
      c->p += 8 * (nf & 0x7f);
      if (nf & kHasPayload) {
        uint32_t len = 0;
        if (!c->Get(&len) || static_cast<size_t>(c->end - c->p) < len)
          return false;
        c->p += len;
      }
    }
    return true;
  }
  bool ReadProblems(Cursor* c) {
    uint32_t n = 0;
    if (!c->Get(&n))
      return false;
    for (uint32_t i = 0; i < n; ++i) {
      format::Problem p;
      uint8_t tail = 0, harmless = 0, has_loc = 0;
      uint32_t loc = 0, len = 0;
      if (!c->Get(&p.offset) || !c->Get(&p.events_lost) || !c->Get(&tail) || !c->Get(&harmless) ||
          !c->Get(&has_loc) || !c->Get(&loc) || !c->Get(&len) ||
          static_cast<size_t>(c->end - c->p) < len)
        return false;
      p.tail = tail;
      p.harmless = harmless;
      if (has_loc)
        p.location = loc;
      p.message.assign(reinterpret_cast<const char*>(c->p), len);
      c->p += len;
      problems_.push_back(std::move(p));
    }
    return true;
  }
  bool Bad(const char* what) {
    done_ = true;
    if (error_.empty())
      error_ = fmt::format("the events from process {} are malformed: {}", from_, what);
    return false;
  }

  const Group& g_;
  int from_;
  std::array<std::vector<uint8_t>, kDepth> buf_;
  std::array<void*, kDepth> req_ = {};
  int which_ = 0;
  bool started_ = false;
  bool last_ = false;
  bool done_ = false;
  uint32_t left_ = 0;
  Cursor cur_{nullptr, nullptr};
  std::vector<format::Problem> problems_;
  std::string error_;
};

// Process 0: the senders' merges merged by (time, stream), as one merge of every stream would
// have ordered them, fed to the engine.
Status Gather(const Group& group, const model::Session& session, analysis::Engine* engine) {
  const format::TraceReader& reader = session.reader();
  engine->BeginFeed();
  std::vector<std::unique_ptr<Input>> inputs;
  for (int r = 1; r < group.size(); ++r)
    inputs.push_back(std::make_unique<Input>(group, r));
  std::vector<Input*> live;
  for (auto& in : inputs)
    if (in->Next())
      live.push_back(in.get());
  // Each stream's event as its merge's head holds it: arguments past nargs keep the stream's
  // earlier values, as a decoder leaves them (the engine sees exactly what one merge shows it).
  std::vector<format::Event> head(session.streams().size());
  const size_t n_streams = head.size();
  while (!live.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < live.size(); ++i)
      if (live[i]->ts < live[best]->ts ||
          (live[i]->ts == live[best]->ts && live[i]->stream < live[best]->stream))
        best = i;
    Input& in = *live[best];
    // This input's events while they sort before every other input's head.
    bool more = true;
    while (more) {
      if (in.stream >= n_streams)
        return Status::Error(
            fmt::format("process {} sent an event of stream {}, which the session does not have",
                        best + 1, in.stream));
      format::Event& e = head[in.stream];
      e.ts = in.ts;
      e.location = in.location;
      e.kind = in.kind;
      e.source = static_cast<format::Source>(in.source);
      e.nargs = in.nargs;
      memcpy(e.args, in.args, 8u * in.nargs);
      e.payload = in.payload;
      if (!engine->Feed(e, in.stream))
        return Status::Error(fmt::format(
            "the processes of the parallel report disagree on the window of stream {}", in.stream));
      more = in.Next();
      if (!more)
        break;
      for (size_t i = 0; i < live.size() && more; ++i)
        if (i != best &&
            (live[i]->ts < in.ts || (live[i]->ts == in.ts && live[i]->stream < in.stream)))
          more = false;
    }
    if (!in.error().empty())
      return Status::Error(in.error());
    if (in.done())
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(best));
  }
  // Damage the senders found while decoding, as if found here (in the order of the senders).
  for (const auto& in : inputs)
    for (const format::Problem& p : in->problems())
      reader.AddFoundProblem(p);
  return Status::Ok();
}

}  // namespace

int LauncherSize() {
  int n = EnvInt("OMPI_COMM_WORLD_SIZE", 0);
  if (n == 0)
    n = EnvInt("PMI_SIZE", 0);
  return std::max(n, 1);
}

int LauncherRank() {
  int r = EnvInt("OMPI_COMM_WORLD_RANK", -1);
  if (r < 0)
    r = EnvInt("PMI_RANK", 0);
  return r;
}

StatusOr<std::unique_ptr<Group>> Group::Join(const std::string& lib_dir) {
  // OpenMPI's launcher sets OMPI_*; MPICH's (hydra) sets PMI_* only.
  const bool mpich = getenv("OMPI_COMM_WORLD_SIZE") == nullptr;
  std::string path = lib_dir + (mpich ? "/libparmon_report_mpich.so" : "/libparmon_report_mpi.so");
  if (const char* p = getenv("PARMON_REPORT_MPI_LIB"); p && *p)
    path = p;
  // RTLD_GLOBAL: MPI's own plugins (OpenMPI's components) resolve symbols of libmpi.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!lib)
    return Status::Error(
        fmt::format("cannot load the MPI library of the parallel report ({})", dlerror()));
  auto table = reinterpret_cast<parmon_transport_table_fn>(dlsym(lib, "parmon_transport_table"));
  const parmon_transport* t = table ? table() : nullptr;
  if (!t || t->version != PARMON_TRANSPORT_VERSION) {
    dlclose(lib);
    return Status::Error(fmt::format("{} is not this parmon's MPI library", path));
  }
  std::unique_ptr<Group> g(new Group());
  g->lib_ = lib;
  g->t_ = t;
  if (int rc = t->init(&g->rank_, &g->size_); rc != 0)
    return Status::Error(fmt::format("MPI_Init failed (error {})", rc));
  // An MPI other than the launcher's starts every process alone (a world of one).
  if (g->size_ != LauncherSize() || g->rank_ != LauncherRank())
    return Status::Error(fmt::format(
        "{} sees process {} of {} where the launcher started process {} of {} (an MPI other "
        "than the launcher's? PARMON_REPORT_MPI_LIB names the right one)",
        path, g->rank_, g->size_, LauncherRank(), LauncherSize()));
  return g;
}

Group::~Group() {
  if (t_)
    t_->finalize();
  // The library stays loaded: MPI may have registered handlers that run at exit.
}

void Group::Abort(int code) const {
  t_->abort(code);
  _exit(code);
}

StatusOr<analysis::Results> Analyze(const Group& group,
                                    const model::Session& session,
                                    const analysis::Options& options) {
  if (group.size() < 2)
    return analysis::Analyze(session, options);
  analysis::Engine engine(session, options);
  const format::TraceReader& reader = session.reader();
  const size_t problems_at_open = reader.problems().size();
  const int senders = group.size() - 1;
  if (group.rank() > 0) {
    std::vector<std::set<uint32_t>> share = SplitLocations(session, senders);
    model::MergeFilter filter;
    filter.locations = std::move(share[static_cast<size_t>(group.rank() - 1)]);
    filter.from_ts = engine.window().first;
    filter.to_ts = engine.window().second;
    Sender sender(group);
    if (!filter.locations->empty()) {
      model::Merge merge(session, std::move(filter));
      merge.Run([&](const format::Event& e, model::StreamIndex s) { sender.Add(e, s); });
    }
    sender.Finish(reader, problems_at_open);
    return analysis::Results{};
  }
  Status status = Gather(group, session, &engine);
  if (!status.ok()) {
    // The others may be waiting to send: every process ends.
    fmt::print(stderr, "parmon report: {}\n", status.message());
    group.Abort(1);
  }
  return engine.Finish();
}

}  // namespace parmon::parallel
