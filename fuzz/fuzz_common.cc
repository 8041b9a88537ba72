#include "fuzz/fuzz_common.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "analysis/engine.h"
#include "analysis/json_dump.h"
#include "analysis/views.h"
#include "model/merge.h"
#include "model/session.h"

namespace parmon::fuzz {

const std::string& ScratchDir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/parmon_fuzz_XXXXXX";
    const char* made = mkdtemp(tmpl);
    if (!made)
      abort();
    return std::string(made);
  }();
  return dir;
}

void WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    abort();
  for (size_t done = 0; done < size;) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0)
      abort();
    done += static_cast<size_t>(n);
  }
  close(fd);
}

void ConsumeSession(const std::string& path) {
  auto opened = model::Session::Open(path);
  if (!opened.ok())
    return;
  const model::Session& session = **opened;
  {
    // dump's way: one event at a time.
    model::Merge merge(session);
    format::Event e;
    uint64_t n = 0;
    while (merge.Next(&e))
      n += e.nargs;
    (void)n;
  }
  {
    // the analysis' way, in two steps as a live view takes it.
    model::Merge merge(session);
    uint64_t last = 0;
    merge.Run([&](const format::Event& e, model::StreamIndex) { last = e.ts; },
              session.reader().complete_until() / 2);
    merge.Run([&](const format::Event& e, model::StreamIndex) { last = e.ts; });
    (void)last;
  }
  analysis::Options options;
  auto results = analysis::Analyze(session, options);
  if (results.ok()) {
    (void)analysis::RenderText(*results);
    (void)analysis::DumpJson(analysis::ToJson(*results));
    (void)analysis::RenderCsv(*results);
  }
  // A window in the middle, with a fixed interval.
  options.from_ns = 1000;
  options.to_ns = 50'000'000;
  options.interval_ns = 1'000'000;
  (void)analysis::Analyze(session, options);
}

}  // namespace parmon::fuzz
