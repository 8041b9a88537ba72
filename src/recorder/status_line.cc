#include "recorder/status_line.h"

#include <fmt/format.h>

#include <cstdio>

#include "base/units.h"

namespace parmon::recorder {

std::string StatusText(const StatusFigures& f) {
  return fmt::format("parmon: {:.1f} s  {} events  {} written  {} lost",
                     static_cast<double>(f.elapsed_ns) / 1e9, FormatCount(f.events),
                     FormatBytes(f.bytes_written), f.lost);
}

void DrawStatusLine(const StatusFigures& f, bool final_line) {
  fmt::print(stderr, "\r\033[K{}{}", StatusText(f), final_line ? "\n" : "");
  fflush(stderr);
}

}  // namespace parmon::recorder
