#include "common/example.h"

#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace parmon_examples {

Options::Options(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {
  AddString("counts", "", "write the example's own counts (JSON, docs/examples.md) to FILE");
}

void Options::AddInt(const std::string& name, long fallback, long min, long max, std::string help) {
  order_.push_back(name);
  options_[name] = {Type::kInt, std::move(help), std::to_string(fallback), min, max, {}};
}

void Options::AddChoice(const std::string& name,
                        std::string fallback,
                        std::vector<std::string> choices,
                        std::string help) {
  order_.push_back(name);
  options_[name] = {Type::kChoice, std::move(help), std::move(fallback), 0, 0, std::move(choices)};
}

void Options::AddString(const std::string& name, std::string fallback, std::string help) {
  order_.push_back(name);
  options_[name] = {Type::kString, std::move(help), std::move(fallback), 0, 0, {}};
}

void Options::AddFlag(const std::string& name, std::string help) {
  order_.push_back(name);
  options_[name] = {Type::kFlag, std::move(help), "0", 0, 0, {}};
}

void Options::PrintUsage(FILE* out) const {
  fprintf(out, "usage: %s [options]\n%s\n\noptions:\n", program_.c_str(), summary_.c_str());
  for (const auto& name : order_) {
    const Option& o = options_.at(name);
    std::string arg;
    if (o.type == Type::kInt)
      arg = " N";
    if (o.type == Type::kString)
      arg = " FILE";
    if (o.type == Type::kChoice) {
      arg = " ";
      for (size_t i = 0; i < o.choices.size(); ++i)
        arg += (i ? "|" : "") + o.choices[i];
    }
    std::string left = "--" + name + arg;
    std::string dflt = o.type == Type::kFlag || o.value.empty() ? "" : " (default " + o.value + ")";
    fprintf(out, "  %-26s %s%s\n", left.c_str(), o.help.c_str(), dflt.c_str());
  }
}

void Options::Fail(const std::string& sentence, bool quiet) const {
  if (!quiet)
    fprintf(stderr, "%s: %s (see %s --help)\n", program_.c_str(), sentence.c_str(),
            program_.c_str());
  exit(2);
}

void Options::Parse(int argc, char** argv, bool quiet) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      if (!quiet)
        PrintUsage(stdout);
      exit(0);
    }
    if (arg.rfind("--", 0) != 0)
      Fail("unexpected argument '" + arg + "'", quiet);
    std::string name = arg.substr(2);
    std::string value;
    bool inline_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    auto it = options_.find(name);
    if (it == options_.end())
      Fail("unknown option '--" + name + "'", quiet);
    Option& o = it->second;
    if (o.type == Type::kFlag) {
      if (inline_value)
        Fail("option '--" + name + "' takes no value", quiet);
      o.value = "1";
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= argc)
        Fail("option '--" + name + "' needs a value", quiet);
      value = argv[++i];
    }
    if (o.type == Type::kInt) {
      errno = 0;
      char* end = nullptr;
      long v = strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno != 0)
        Fail("'--" + name + "' wants a whole number, not '" + value + "'", quiet);
      if (v < o.min || v > o.max)
        Fail("'--" + name + "' must be between " + std::to_string(o.min) + " and " +
                 std::to_string(o.max) + ", not " + value,
             quiet);
    }
    if (o.type == Type::kChoice) {
      bool known = false;
      std::string list;
      for (const auto& c : o.choices) {
        known = known || c == value;
        list += (list.empty() ? "" : ", ") + c;
      }
      if (!known)
        Fail("'--" + name + "' must be one of " + list + ", not '" + value + "'", quiet);
    }
    o.value = value;
  }
}

const Options::Option& Options::Find(const std::string& name, Type type) const {
  auto it = options_.find(name);
  if (it == options_.end() || it->second.type != type) {
    fprintf(stderr, "%s: internal error: option '%s' not declared\n", program_.c_str(),
            name.c_str());
    abort();
  }
  return it->second;
}

long Options::Int(const std::string& name) const {
  return strtol(Find(name, Type::kInt).value.c_str(), nullptr, 10);
}

const std::string& Options::String(const std::string& name) const {
  auto it = options_.find(name);
  if (it != options_.end() && it->second.type == Type::kChoice)
    return it->second.value;
  return Find(name, Type::kString).value;
}

bool Options::Flag(const std::string& name) const {
  return Find(name, Type::kFlag).value == "1";
}

void SleepMicroseconds(long us) {
  timespec t{us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

int LauncherRank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (const char* v = getenv(var))
      return atoi(v);
  return 0;
}

void Location::CountSend(int peer, uint64_t bytes) {
  ++messages_sent[peer];
  bytes_sent[peer] += bytes;
}

void Location::CountReceive(int peer, uint64_t bytes) {
  ++messages_received[peer];
  bytes_received[peer] += bytes;
}

namespace {
nlohmann::json PerPeer(const std::map<int, uint64_t>& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [peer, n] : m)
    j[std::to_string(peer)] = n;
  return j;
}
}  // namespace

nlohmann::json Location::ToJson() const {
  nlohmann::json j;
  j["thread"] = thread;
  if (rank >= 0)
    j["rank"] = rank;
  j["regions"] = regions;
  j["messages_sent"] = PerPeer(messages_sent);
  j["bytes_sent"] = PerPeer(bytes_sent);
  j["messages_received"] = PerPeer(messages_received);
  j["bytes_received"] = PerPeer(bytes_received);
  j["collectives"] = collectives;
  nlohmann::json data = nlohmann::json::object();
  for (const auto& [id, n] : trace_data)
    data[std::to_string(id)] = n;
  j["trace_data"] = data;
  return j;
}

nlohmann::json Report::ToJson() const {
  nlohmann::json j;
  j["example"] = example;
  j["ok"] = ok;
  j["params"] = params;
  j["results"] = results;
  j["locations"] = locations;
  return j;
}

bool Report::Write(const std::string& path) const {
  if (path.empty())
    return true;
  std::ofstream out(path);
  out << ToJson().dump(2) << "\n";
  out.close();
  if (!out) {
    fprintf(stderr, "%s: cannot write counts to %s: %s\n", example.c_str(), path.c_str(),
            strerror(errno));
    return false;
  }
  return true;
}

bool WriteChildCounts(const std::string& counts, const Location& location) {
  if (counts.empty())
    return true;
  std::ofstream file(counts + "." + location.thread);
  file << location.ToJson().dump();
  file.close();
  if (!file)
    fprintf(stderr, "cannot write %s.%s\n", counts.c_str(), location.thread.c_str());
  return static_cast<bool>(file);
}

bool MergeChildCounts(const std::string& counts,
                      const std::vector<std::string>& threads,
                      Report* report) {
  bool ok = true;
  for (size_t i = 0; i < threads.size() && !counts.empty(); ++i) {
    std::string path = counts + "." + threads[i];
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_discarded()) {
      fprintf(stderr, "%s: %s left no counts in %s\n", report->example.c_str(), threads[i].c_str(),
              path.c_str());
      ok = false;
    } else {
      report->locations.push_back(j);
    }
    unlink(path.c_str());
  }
  return ok;
}

}  // namespace parmon_examples
