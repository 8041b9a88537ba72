// The terminal of `parmon top`: raw keys, the alternate screen, its size. Plain ANSI/VT100
// escapes rather than ncurses (docs/man/parmon-top.md says why): top redraws its whole screen
// from one string per frame, the same renderer writes the --batch text, and the only terminal
// state to restore is the termios settings, the cursor and the alternate screen, which the
// destructor and a SIGINT/SIGTERM (through the follow stop flag) both reach.
#ifndef PARMON_SRC_LIVE_VIEW_TERMINAL_H_
#define PARMON_SRC_LIVE_VIEW_TERMINAL_H_

#include <termios.h>

#include <cstdint>
#include <string>

namespace parmon::live_view {

enum class Key {
  kNone,
  kQuit,
  kPause,
  kFaster,  // '-': shorter period
  kSlower,  // '+': longer period
  kSort,
  kThread,  // 't': show only the process of the thread under the cursor (again: all)
  kUp,
  kDown,
  kPageUp,
  kPageDown,
  kHome,
  kEnd,
  kOther,
};

class Terminal {
 public:
  // Puts the terminal of standard input/output in raw mode (no echo, keys one by one, signals
  // kept) and switches to the alternate screen with the cursor hidden.
  Terminal();
  ~Terminal();
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  // Waits up to timeout_ns for a key (returns kNone when none came or on a signal).
  Key ReadKey(uint64_t timeout_ns);
  // Rows and columns (80x24 when the terminal does not say).
  void Size(int* rows, int* cols) const;
  // Draws a whole screen (lines separated by '\n', each already cut to the width).
  void Draw(const std::string& screen);

 private:
  termios saved_{};
  bool raw_ = false;
};

// Parses the bytes of one key press (a character or an escape sequence).
Key ParseKey(const std::string& bytes);

}  // namespace parmon::live_view

#endif  // PARMON_SRC_LIVE_VIEW_TERMINAL_H_
