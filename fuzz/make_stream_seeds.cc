// Writes the seed corpus of fuzz_stream (fuzz/corpus/stream/) from real traces, with the live
// protocol's own encoders: conversations as a recorder, a consumer and a control client hold
// them with `parmon serve`, and a collector's answers to `parmon fetch`.
//   build/fuzz/bin/make_stream_seeds fuzz/corpus/trace/threads_regions.ptrace \
//       fuzz/corpus/rank_dir/mpi_patterns_2ranks fuzz/corpus/stream
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "live/protocol.h"

namespace {

using namespace parmon::live;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The trace as DATA frames of at most `piece` bytes.
std::string DataFrames(const std::string& trace, size_t piece) {
  std::string out;
  for (size_t off = 0; off < trace.size(); off += piece)
    out +=
        EncodeFrame(FrameType::kData, EncodeData(off, std::string_view(trace).substr(off, piece)));
  return out;
}

std::string Recorder(const std::string& session, const std::string& trace, int rank, int ranks) {
  Hello h;
  h.role = "recorder";
  h.session = session;
  h.stream_id = "seed-" + std::to_string(rank);
  h.host = "seedhost";
  h.pid = 4242 + rank;
  if (rank >= 0) {
    h.job = "job-1";
    h.rank = rank;
    h.ranks = ranks;
  }
  return EncodeFrame(FrameType::kHello, EncodeHello(h)) + DataFrames(trace, 1500) +
         EncodeFrame(FrameType::kBye, "");
}

std::string Consumer(const nlohmann::json& request, FrameType type) {
  Hello h;
  h.role = "consumer";
  return EncodeFrame(FrameType::kHello, EncodeHello(h)) + EncodeFrame(type, request.dump());
}

void Write(const std::string& dir,
           const std::string& name,
           char mode,
           const std::vector<std::string>& parts) {
  std::string out(1, mode);
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? "\n--conn--\n" : "") + parts[i];
  std::ofstream(dir + "/" + name, std::ios::binary) << out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: make_stream_seeds TRACE RANK_DIR_SEED OUT_DIR\n";
    return 2;
  }
  const std::string trace = Slurp(argv[1]);
  const std::string joined = Slurp(argv[2]);
  const std::string sep = "\n--rank--\n";
  const size_t at = joined.find(sep);
  const std::string rank0 = joined.substr(0, at);
  const std::string rank1 = at == std::string::npos ? "" : joined.substr(at + sep.size());
  const std::string dir = argv[3];
  // Against the collector (mode bit 1 clear); mode 1: the CRCs are made right after mutation.
  Write(dir, "recorder_then_consumer", 1,
        {Recorder("s1", trace, -1, 0),
         Consumer({{"session", "s1"}, {"offset", 0}, {"follow", false}}, FrameType::kSubscribe),
         Consumer({{"session", "s1"}, {"command", "status"}}, FrameType::kControl)});
  Write(dir, "per_rank_session", 1,
        {Recorder("mpi", rank0, 0, 2), Recorder("mpi", rank1, 1, 2),
         Consumer({{"session", "mpi"}, {"follow", false}}, FrameType::kSubscribe),
         Consumer({{"session", "mpi"}, {"rank", 1}, {"offset", 100}, {"follow", false}},
                  FrameType::kSubscribe)});
  Write(dir, "recorder_raw_crc", 0, {Recorder("s2", trace, -1, 0)});
  // Against `parmon fetch` (mode bit 1 set): a collector's answers.
  Write(dir, "collector_single", 3,
        {EncodeFrame(FrameType::kWelcome,
                     nlohmann::json{
                         {"session", "fuzz"}, {"rank", -1}, {"size", trace.size()}, {"ended", true}}
                         .dump()) +
         DataFrames(trace, 2000) + EncodeFrame(FrameType::kBye, "")});
  auto rank_answer = [](const std::string& bytes, int rank) {
    return EncodeFrame(
               FrameType::kWelcome,
               nlohmann::json{
                   {"session", "fuzz"}, {"rank", rank}, {"size", bytes.size()}, {"ended", true}}
                   .dump()) +
           DataFrames(bytes, 1800) + EncodeFrame(FrameType::kBye, "");
  };
  Write(dir, "collector_per_rank", 3,
        {EncodeFrame(FrameType::kWelcome,
                     nlohmann::json{{"session", "fuzz"}, {"ranks", {0, 1}}}.dump()) +
             EncodeFrame(FrameType::kBye, ""),
         rank_answer(rank0, 0), rank_answer(rank1, 1)});
  Write(dir, "collector_refuses", 3,
        {EncodeFrame(FrameType::kBye, nlohmann::json{{"error", "no session fuzz"}}.dump())});
  return 0;
}
