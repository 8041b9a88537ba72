// Terminal (terminal.h): raw mode, keys, size, drawing a screen.
#include "live_view/terminal.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>

namespace parmon::live_view {
namespace {

void WriteAll(const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = write(STDOUT_FILENO, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    done += static_cast<size_t>(n);
  }
}

}  // namespace

Key ParseKey(const std::string& b) {
  if (b.empty())
    return Key::kNone;
  if (b.size() == 1) {
    switch (b[0]) {
      case 'q':
      case 'Q':
        return Key::kQuit;
      case 'p':
      case 'P':
      case ' ':
        return Key::kPause;
      case '+':
      case '=':
        return Key::kSlower;
      case '-':
      case '_':
        return Key::kFaster;
      case 's':
      case 'S':
        return Key::kSort;
      case 't':
      case 'T':
        return Key::kThread;
      case 'k':
        return Key::kUp;
      case 'j':
        return Key::kDown;
      default:
        return Key::kOther;
    }
  }
  // ESC [ A..D, ESC [ 5~ / 6~, ESC [ H / F, ESC O A.. (application cursor mode).
  if (b[0] == '\033' && b.size() >= 3 && (b[1] == '[' || b[1] == 'O')) {
    switch (b[2]) {
      case 'A':
        return Key::kUp;
      case 'B':
        return Key::kDown;
      case 'H':
        return Key::kHome;
      case 'F':
        return Key::kEnd;
      case '5':
        return Key::kPageUp;
      case '6':
        return Key::kPageDown;
      case '1':
        return Key::kHome;
      case '4':
        return Key::kEnd;
      default:
        break;
    }
  }
  return Key::kOther;
}

Terminal::Terminal() {
  if (tcgetattr(STDIN_FILENO, &saved_) == 0) {
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_iflag &= ~static_cast<tcflag_t>(IXON | ICRNL);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    raw_ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0;
  }
  // Alternate screen, hidden cursor, cleared.
  WriteAll("\033[?1049h\033[?25l\033[H\033[2J");
}

Terminal::~Terminal() {
  WriteAll("\033[0m\033[?25h\033[?1049l");
  if (raw_)
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
}

Key Terminal::ReadKey(uint64_t timeout_ns) {
  pollfd p{STDIN_FILENO, POLLIN, 0};
  const int ms = static_cast<int>(timeout_ns / 1'000'000);
  if (poll(&p, 1, ms) <= 0 || !(p.revents & POLLIN))
    return Key::kNone;
  char buf[16];
  ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
  if (n <= 0)
    return Key::kNone;
  return ParseKey(std::string(buf, static_cast<size_t>(n)));
}

void Terminal::Size(int* rows, int* cols) const {
  winsize w{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_row > 0 && w.ws_col > 0) {
    *rows = w.ws_row;
    *cols = w.ws_col;
  } else {
    *rows = 24;
    *cols = 80;
  }
}

void Terminal::Draw(const std::string& screen) {
  // Home, then each line cleared to its end, then the rest of the screen cleared: no flicker
  // from clearing the whole screen first.
  std::string out = "\033[H";
  size_t start = 0;
  while (start <= screen.size()) {
    size_t end = screen.find('\n', start);
    if (end == std::string::npos)
      end = screen.size();
    out.append(screen, start, end - start);
    out += "\033[0m\033[K";
    if (end == screen.size())
      break;
    out += "\r\n";
    start = end + 1;
  }
  out += "\033[J";
  WriteAll(out);
}

}  // namespace parmon::live_view
