// The recorder's one-line status on a terminal: elapsed time, events, bytes written, events lost.
// Redrawn in place (carriage return + erase line) a few times a second; the last one ends the line.
#ifndef PARMON_SRC_RECORDER_STATUS_LINE_H_
#define PARMON_SRC_RECORDER_STATUS_LINE_H_

#include <cstdint>
#include <string>

namespace parmon::recorder {

struct StatusFigures {
  uint64_t elapsed_ns = 0;
  uint64_t events = 0;
  uint64_t bytes_written = 0;
  uint64_t lost = 0;
};

// The text of the line, without the terminal control codes.
std::string StatusText(const StatusFigures& f);
// Draws it on stderr over the previous one; `final_line` ends it with a newline.
void DrawStatusLine(const StatusFigures& f, bool final_line);

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_STATUS_LINE_H_
