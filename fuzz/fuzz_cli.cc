// Fuzz target: the command lines of the reading subcommands (info, dump, report, diff) over a
// small real trace. The input picks the subcommand and then a list of words, each either a token
// of a table (every option, hostile values such as 1ns, 0, -5, 1e30, 18446744073709551616) or a
// literal taken from the input. Literals never start with '-' and hold no '/', and -o always
// names a file in the scratch directory, so no input can make parmon write outside it or read a
// device; the bounds on what an option may ask (intervals, windows) are what is being tested.
// record, scale and demo run programs and are left out.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "fuzz/fuzz_common.h"

#ifndef PARMON_FUZZ_SEED_TRACE
#error "PARMON_FUZZ_SEED_TRACE names the trace the command lines read"
#endif

namespace {

const char* const kTokens[] = {"--format",   "text",
                               "json",       "csv",
                               "html",       "--json",
                               "--partial",  "--absolute",
                               "--from",     "--to",
                               "--interval", "--color",
                               "auto",       "always",
                               "never",      "--tid",
                               "--pid",      "--location",
                               "1ns",        "10ns",
                               "1us",        "1ms",
                               "0",          "-5",
                               "1e30",       "18446744073709551616",
                               "1.5s",       "abc",
                               "0s",         "100h",
                               "1",          "2",
                               "--help",     "--",
                               "-",          "TRACE",
                               "TRACE",      "SESSION",
                               "MISSING",    "-o",
                               "--output",   "--interval=1ns",
                               "--from=5s",  "--to=1ns",
                               "--top",      "--what"};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!std::filesystem::is_regular_file(PARMON_FUZZ_SEED_TRACE)) {
    std::fprintf(stderr, "fuzz_cli: the seed trace %s is missing (fuzz/corpus/trace/ is in git)\n",
                 PARMON_FUZZ_SEED_TRACE);
    std::exit(2);
  }
  // Reports go nowhere; libFuzzer speaks on stderr. Standard input is empty.
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  dup2(null, STDOUT_FILENO);
  dup2(null, STDIN_FILENO);
  close(null);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parmon;
  namespace fs = std::filesystem;
  if (size == 0)
    return 0;
  const std::string& dir = fuzz::ScratchDir();
  const std::string trace = dir + "/cli.ptrace";
  const std::string session = dir + "/cli_session";
  static const bool made = [&] {
    fs::copy_file(PARMON_FUZZ_SEED_TRACE, trace, fs::copy_options::overwrite_existing);
    fs::create_directories(session);
    fs::copy_file(PARMON_FUZZ_SEED_TRACE, session + "/rank-0.ptrace",
                  fs::copy_options::overwrite_existing);
    return true;
  }();
  (void)made;

  static const cli::Command kCommands[] = {{"info", "", cli::RunInfo},
                                           {"dump", "", cli::RunDump},
                                           {"report", "", cli::RunReport},
                                           {"diff", "", cli::RunDiff}};
  const cli::Command& command = kCommands[data[0] % 4];
  std::vector<std::string> words = {command.name};
  constexpr size_t kTokenCount = sizeof kTokens / sizeof kTokens[0];
  for (size_t i = 1; i < size && words.size() < 24;) {
    const uint8_t b = data[i++];
    if (b < 0xC0) {
      std::string t = kTokens[b % kTokenCount];
      if (t == "TRACE")
        t = trace;
      else if (t == "SESSION")
        t = session;
      else if (t == "MISSING")
        t = dir + "/no such file";
      words.push_back(t);
      if (t == "-o" || t == "--output")
        words.push_back(dir + "/out");
      continue;
    }
    // A literal of up to 16 bytes.
    size_t n = std::min<size_t>(b - 0xC0 + 1, size - i);
    std::string literal(reinterpret_cast<const char*>(data + i), n);
    i += n;
    for (char& c : literal)
      if (c == '\0' || c == '/')
        c = '_';
    if (!literal.empty() && literal[0] == '-')
      literal[0] = '_';
    words.push_back(literal);
  }
  std::vector<char*> argv;
  for (std::string& w : words)
    argv.push_back(w.data());
  argv.push_back(nullptr);
  (void)command.run(static_cast<int>(words.size()), argv.data());
  return 0;
}
