// Builds small traces through the format library, for tests whose right answer is known by
// construction: definitions, per-location event streams, session and END key/values.
#ifndef PARMON_TESTS_REPORT_TRACE_BUILDER_H_
#define PARMON_TESTS_REPORT_TRACE_BUILDER_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/codec.h"
#include "format/writer.h"

namespace parmon::testing {

constexpr uint64_t kMs = 1000000;
// Session clock value of the session start: tests write times relative to it.
constexpr uint64_t kT0 = 50 * kMs;

// A definition event (DefString, DefLocation, DefProcess ...) at ts; payload must outlive it.
inline format::Event DefinitionEvent(format::Kind kind,
                                     const std::vector<uint64_t>& args,
                                     const std::string& payload,
                                     uint64_t ts = kT0) {
  format::Event e;
  e.ts = ts;
  e.kind = static_cast<uint16_t>(kind);
  e.source = format::Source::kDefinitions;
  e.nargs = static_cast<uint8_t>(args.size());
  for (size_t i = 0; i < args.size(); ++i)
    e.args[i] = args[i];
  e.payload = payload;
  return e;
}

class TraceBuilder {
 public:
  using KeyValues = std::vector<std::pair<std::string, std::string>>;
  explicit TraceBuilder(std::string path) : path_(std::move(path)) {}

  void Session(KeyValues kv) { session_ = std::move(kv); }
  void String(uint32_t id, format::StringCategory category, const std::string& text) {
    Def(format::Kind::kDefString, {id, static_cast<uint64_t>(category)}, text);
  }
  void Thread(uint32_t location, uint32_t pid, uint32_t tid, const std::string& name) {
    Def(format::Kind::kDefLocation,
        {location, static_cast<uint64_t>(format::LocationType::kThread), pid, tid}, name);
  }
  void Cpu(uint32_t location, uint32_t cpu) {
    Def(format::Kind::kDefLocation,
        {location, static_cast<uint64_t>(format::LocationType::kCpu), 0, cpu},
        "cpu" + std::to_string(cpu));
  }
  void Process(uint32_t pid, uint32_t ppid, const std::string& command) {
    Def(format::Kind::kDefProcess, {pid, ppid}, command);
  }
  // The switch-record budget stopped the records of process pid's tree at kT0 + t
  // (SwitchesStopped: records, window_records, window_ns, capacity_ns, cost_ns, budget_ppm).
  void SwitchesStopped(uint64_t t, uint32_t pid, std::vector<uint64_t> figures) {
    figures.insert(figures.begin(), pid);
    defs_.Append(DefinitionEvent(format::Kind::kSwitchesStopped, figures, "", kT0 + t));
  }
  // An event at kT0 + t on a location (times in args are absolute: use At()).
  void Ev(uint32_t location,
          uint64_t t,
          format::Kind kind,
          std::vector<uint64_t> args = {},
          const std::string& payload = "",
          format::Source source = format::Source::kRuntime) {
    format::Event e;
    e.ts = kT0 + t;
    e.location = location;
    e.kind = static_cast<uint16_t>(kind);
    e.nargs = static_cast<uint8_t>(args.size());
    for (size_t i = 0; i < args.size(); ++i)
      e.args[i] = args[i];
    payloads_.push_back(std::make_unique<std::string>(payload));
    e.payload = *payloads_.back();
    auto key = std::make_pair(location, source);
    auto it = encoders_.find(key);
    if (it == encoders_.end())
      it = encoders_.emplace(key, std::make_unique<format::StreamEncoder>(location, source)).first;
    it->second->Append(e);
  }
  static uint64_t At(uint64_t t) { return kT0 + t; }

  // Writes the file; returns false when the writer failed.
  bool Finish(KeyValues end_kv = {}) {
    auto w = format::TraceWriter::Create(path_);
    if (!w.ok())
      return false;
    if (!(*w)->WriteSession(session_).ok())
      return false;
    if (defs_.count() && !(*w)->Flush(&defs_).ok())
      return false;
    for (auto& [key, enc] : encoders_)
      if (enc->count() && !(*w)->Flush(enc.get()).ok())
        return false;
    return (*w)->Finish(end_kv).ok();
  }

 private:
  void Def(format::Kind kind, std::vector<uint64_t> args, const std::string& payload) {
    defs_.Append(DefinitionEvent(kind, args, payload));
  }

  std::string path_;
  KeyValues session_;
  format::StreamEncoder defs_{0, format::Source::kDefinitions};
  std::map<std::pair<uint32_t, format::Source>, std::unique_ptr<format::StreamEncoder>> encoders_;
  std::vector<std::unique_ptr<std::string>> payloads_;
};

}  // namespace parmon::testing

#endif  // PARMON_TESTS_REPORT_TRACE_BUILDER_H_
