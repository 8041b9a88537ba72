// What the live benchmarks share: starting a program in the background with its output in files,
// and reading a file whole.
#ifndef PARMON_BENCH_BENCH_SPAWN_H_
#define PARMON_BENCH_BENCH_SPAWN_H_

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace parmon::bench {

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Starts argv[0] (a full path) with its standard output and error in files; its pid.
inline pid_t Spawn(const std::vector<std::string>& argv,
                   const std::string& out,
                   const std::string& err) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

}  // namespace parmon::bench

#endif  // PARMON_BENCH_BENCH_SPAWN_H_
