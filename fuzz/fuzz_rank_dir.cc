// Fuzz target: a session recorded per rank (a directory of rank-<K>.ptrace files whose clocks
// are aligned on rank 0's). The input is cut into up to three files at each "\n--rank--\n"
// separator; the seeds are real per-rank sessions joined that way.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parmon;
  namespace fs = std::filesystem;
  const std::string dir = fuzz::ScratchDir() + "/session";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  constexpr std::string_view kSeparator = "\n--rank--\n";
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (int rank = 0; rank < 3 && !rest.empty(); ++rank) {
    size_t at = rank < 2 ? rest.find(kSeparator) : std::string_view::npos;
    std::string_view part = rest.substr(0, at);
    fuzz::WriteFile(dir + "/rank-" + std::to_string(rank) + ".ptrace",
                    reinterpret_cast<const uint8_t*>(part.data()), part.size());
    rest = at == std::string_view::npos ? std::string_view() : rest.substr(at + kSeparator.size());
  }
  fuzz::ConsumeSession(dir);
  return 0;
}
