// Render (top_view.h): one screen of `parmon top`. Lines are built from styled segments whose
// visible width is counted, so a line is cut at the terminal's width without cutting an escape.
#include "live_view/top_view.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "analysis/units.h"

namespace parmon::live_view {
namespace {

using analysis::State;

// The report's states, their colours (SGR) and the letter a bar uses without colour.
struct StateStyle {
  State state;
  const char* sgr;
  char letter;
};
constexpr StateStyle kStyles[] = {
    {State::kRunning, "32", 'R'},  {State::kRunnable, "33", 'Q'},  {State::kCommWait, "31", 'C'},
    {State::kLockWait, "35", 'L'}, {State::kTimerWait, "34", 'T'}, {State::kIoWait, "36", 'I'},
    {State::kOther, "90", '.'},
};

class Line {
 public:
  Line(int width, bool color) : width_(width), color_(color) {}
  // Appends text (ASCII) in a style (SGR parameters, "" for plain).
  Line& Add(const std::string& text, const char* sgr = "") {
    std::string t = text;
    if (width_ > 0 && used_ + static_cast<int>(t.size()) > width_)
      t.resize(static_cast<size_t>(std::max(0, width_ - used_)));
    if (t.empty())
      return *this;
    used_ += static_cast<int>(t.size());
    if (color_ && *sgr)
      out_ += fmt::format("\033[{}m{}\033[0m", sgr, t);
    else
      out_ += t;
    return *this;
  }
  // Pads with spaces to the full width (for an inverse bar).
  Line& Fill(const char* sgr = "") {
    if (width_ > used_)
      Add(std::string(static_cast<size_t>(width_ - used_), ' '), sgr);
    return *this;
  }
  int used() const { return used_; }
  const std::string& str() const { return out_; }

 private:
  int width_;
  bool color_;
  int used_ = 0;
  std::string out_;
};

std::string Percent(double share) {
  return fmt::format("{:3.0f}%", std::clamp(share, 0.0, 1.0) * 100);
}

// The bar of a state split: each state's share of `width` cells, rounded so the cells add up.
void AddBar(Line& line, const ThreadRow& t, int width, bool color) {
  line.Add("[");
  int drawn = 0;
  double acc = 0;
  for (const auto& st : kStyles) {
    acc += t.Share(st.state);
    const int upto = static_cast<int>(std::lround(acc * width));
    const int cells = std::max(0, upto - drawn);
    if (cells == 0)
      continue;
    // Idle or unknown time stays blank in colour, as htop leaves its bars' idle part empty.
    const char glyph = color ? (st.state == State::kOther ? ' ' : '|') : st.letter;
    line.Add(std::string(static_cast<size_t>(cells), glyph), st.sgr);
    drawn += cells;
  }
  if (drawn < width)
    line.Add(std::string(static_cast<size_t>(width - drawn), ' '));
  line.Add("]");
}

// The state a thread spent most of the last interval in.
const char* TopState(const ThreadRow& t) {
  if (!t.last_ns)
    return "-";
  int best = 0;
  for (int i = 1; i < analysis::kStateCount; ++i)
    if (t.last[i] > t.last[best])
      best = i;
  return analysis::StateName(static_cast<State>(best));
}

std::string Rate(double bytes_per_s) {
  return analysis::FormatBytes(static_cast<uint64_t>(std::llround(bytes_per_s))) + "/s";
}

void Header(const Frame& f, const ViewState& v, const RenderOptions& o, std::vector<Line>* out) {
  Line h(o.cols, o.color);
  h.Add(" parmon top ", "1;7");
  h.Add(" " + (f.command.empty() ? f.file : f.command) + " ", "1");
  h.Add(f.finished ? " ended " : " recording ", f.finished ? "1;34" : "1;32");
  h.Add(fmt::format(" {} covered", analysis::FormatDuration(f.covered_ns)));
  out->push_back(std::move(h));
  Line s(o.cols, o.color);
  s.Add(fmt::format(" events {}  lost ", analysis::FormatCount(f.events)));
  s.Add(analysis::FormatCount(f.lost), f.lost ? "1;31" : "");
  s.Add(fmt::format("  paused {}  interval {}  period {}{}",
                    f.paused < 0 ? std::string("-")
                    : f.paused == 0
                        ? std::string("0")
                        : fmt::format("{} ({})", f.paused, analysis::FormatDuration(f.paused_ns)),
                    analysis::FormatDuration(f.interval_ns), analysis::FormatDuration(v.period_ns),
                    v.paused ? "  [display paused]" : ""));
  out->push_back(std::move(s));
  Line legend(o.cols, o.color);
  legend.Add(" states:");
  for (const auto& st : kStyles) {
    legend.Add(" ");
    legend.Add(o.color ? std::string("|") : std::string(1, st.letter), st.sgr);
    legend.Add(std::string(" ") + analysis::StateName(st.state));
  }
  out->push_back(std::move(legend));
  if (!v.message.empty())
    out->push_back(std::move(Line(o.cols, o.color).Add(" " + v.message, "1;33")));
}

void ThreadTable(const Frame& f,
                 const ViewState& v,
                 const RenderOptions& o,
                 int max_rows,
                 std::vector<Line>* out) {
  const std::vector<size_t> order = VisibleThreads(f, v);
  // RANK PID TID NAME [bar] RUN WAIT STATE
  constexpr int kFixed = 5 + 1 + 7 + 1 + 7 + 1 + 16 + 1 + 2 + 1 + 4 + 1 + 5 + 1 + 10;
  const int bar = o.cols > 0 ? std::max(10, o.cols - kFixed) : 40;
  Line head(o.cols, o.color);
  head.Add(
      fmt::format("{:>5} {:>7} {:>7} {:<16} {:<{}} {:>4} {:>5} {:<10}", "RANK", "PID", "TID",
                  "THREAD", fmt::format("STATES, LAST {}", analysis::FormatDuration(f.interval_ns)),
                  bar + 2, "RUN", "WAIT", "MOSTLY"),
      "1;7");
  head.Fill("1;7");
  out->push_back(std::move(head));
  size_t first = o.rows > 0 ? std::min(v.scroll, order.size()) : 0;
  size_t last =
      max_rows > 0 ? std::min(order.size(), first + static_cast<size_t>(max_rows)) : order.size();
  for (size_t k = first; k < last; ++k) {
    const ThreadRow& t = f.threads[order[k]];
    const bool selected = !o.batch && k == v.cursor;
    Line l(o.cols, o.color);
    std::string name = t.name.empty() ? "-" : t.name.substr(0, 16);
    l.Add(
        fmt::format("{:>5} {:>7} {:>7} ", t.rank >= 0 ? std::to_string(t.rank) : "-", t.pid, t.tid),
        selected ? "7" : "");
    l.Add(fmt::format("{:<16}", name), selected ? "1;7" : "1");
    l.Add(" ");
    AddBar(l, t, bar, o.color);
    l.Add(fmt::format(" {} {:>5} {:<10}", Percent(t.Share(State::kRunning)), Percent(t.WaitShare()),
                      TopState(t)));
    out->push_back(std::move(l));
  }
  if (last < order.size() || first > 0)
    out->push_back(std::move(
        Line(o.cols, o.color)
            .Add(fmt::format("  ({}-{} of {} threads)", first + 1, last, order.size()), "90")));
}

void CpuSection(const Frame& f, const RenderOptions& o, std::vector<Line>* out) {
  if (f.cpus.empty())
    return;
  out->push_back(std::move(Line(o.cols, o.color).Add("CPUS (busy, last interval)", "1")));
  constexpr int kCell = 24;  // "cpu 12 [||||||    ] 45%"
  const int per_line = std::max(1, (o.cols > 0 ? o.cols : 120) / kCell);
  for (size_t i = 0; i < f.cpus.size(); i += static_cast<size_t>(per_line)) {
    Line l(o.cols, o.color);
    for (size_t j = i; j < std::min(f.cpus.size(), i + static_cast<size_t>(per_line)); ++j) {
      const CpuRow& c = f.cpus[j];
      const int cells = 10;
      const int busy = static_cast<int>(std::lround(std::clamp(c.busy, 0.0, 1.0) * cells));
      l.Add(fmt::format(" {:>6} [", c.label.substr(0, 6)));
      l.Add(std::string(static_cast<size_t>(busy), '|'), c.busy > 0.9 ? "31" : "32");
      l.Add(std::string(static_cast<size_t>(cells - busy), ' '));
      l.Add(fmt::format("]{} ", Percent(c.busy)));
    }
    out->push_back(std::move(l));
  }
}

void LinkSection(const Frame& f, const RenderOptions& o, size_t max, std::vector<Line>* out) {
  if (f.links.empty())
    return;
  Line head(o.cols, o.color);
  head.Add(fmt::format("{:<44} {:>7} {:>12} {:>9} {:>8} {:>8} {:>10}", "LINK (busiest)", "KIND",
                       "BYTES/S", "MSGS/S", "SND WAIT", "RCV WAIT", "TOTAL"),
           "1;7");
  head.Fill("1;7");
  out->push_back(std::move(head));
  for (size_t i = 0; i < std::min(max, f.links.size()); ++i) {
    const LinkRow& k = f.links[i];
    Line l(o.cols, o.color);
    l.Add(fmt::format("{:<44} {:>7} {:>12} {:>9.0f}", (k.from + " -> " + k.to).substr(0, 44),
                      k.kind, Rate(k.bytes_per_s), k.messages_per_s));
    for (double w : {k.sender_wait, k.receiver_wait})
      l.Add(fmt::format(" {:>8}", Percent(w)), w > 0.5 ? "1;31" : "");
    l.Add(fmt::format(" {:>10}", analysis::FormatBytes(k.bytes)));
    out->push_back(std::move(l));
  }
}

void FindingSection(const Frame& f, const RenderOptions& o, size_t max, std::vector<Line>* out) {
  out->push_back(std::move(Line(o.cols, o.color).Add("FINDINGS (so far)", "1")));
  if (f.findings.empty())
    out->push_back(std::move(Line(o.cols, o.color).Add("  none yet", "90")));
  for (size_t i = 0; i < std::min(max, f.findings.size()); ++i) {
    const FindingRow& x = f.findings[i];
    Line l(o.cols, o.color);
    l.Add(fmt::format("  {:>3.0f}% ", x.percent_of_run), "1;33");
    l.Add(fmt::format("[{}] ", x.id), "36");
    l.Add(fmt::format("(since {}) ", analysis::FormatDuration(x.first_seen_ns)), "90");
    l.Add(x.text);
    out->push_back(std::move(l));
  }
}

}  // namespace

const char* SortName(SortBy s) {
  switch (s) {
    case SortBy::kNatural:
      return "rank/pid";
    case SortBy::kBusy:
      return "running";
    case SortBy::kWait:
      return "waiting";
    case SortBy::kName:
      return "name";
  }
  return "";
}

std::vector<size_t> VisibleThreads(const Frame& frame, const ViewState& view) {
  std::vector<size_t> order;
  for (size_t i = 0; i < frame.threads.size(); ++i)
    if (!view.only_pid || frame.threads[i].pid == *view.only_pid)
      order.push_back(i);
  auto by = [&](auto key) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return key(frame.threads[a], frame.threads[b]); });
  };
  switch (view.sort) {
    case SortBy::kNatural:
      break;
    case SortBy::kBusy:
      by([](const ThreadRow& a, const ThreadRow& b) {
        return a.Share(State::kRunning) > b.Share(State::kRunning);
      });
      break;
    case SortBy::kWait:
      by([](const ThreadRow& a, const ThreadRow& b) { return a.WaitShare() > b.WaitShare(); });
      break;
    case SortBy::kName:
      by([](const ThreadRow& a, const ThreadRow& b) { return a.name < b.name; });
      break;
  }
  return order;
}

namespace {

// The sections of a screen: above the thread table, and below it.
void Sections(const Frame& f,
              const ViewState& v,
              const RenderOptions& o,
              std::vector<Line>* above,
              std::vector<Line>* below) {
  Header(f, v, o, above);
  CpuSection(f, o, below);
  LinkSection(f, o, o.batch ? 10 : 5, below);
  FindingSection(f, o, o.batch ? 10 : 4, below);
  for (const auto& p : f.problems)
    below->push_back(std::move(Line(o.cols, o.color).Add("problem: " + p, "31")));
}

int RowsLeft(const RenderOptions& o,
             const std::vector<Line>& above,
             const std::vector<Line>& below) {
  if (o.rows <= 0)
    return 0;
  // Above, a blank line, the table's head, below, the key line.
  const int left = o.rows - static_cast<int>(above.size()) - 2 - static_cast<int>(below.size()) - 1;
  return std::max(left, 3);
}

}  // namespace

int ThreadRows(const Frame& f, const ViewState& v, const RenderOptions& o) {
  std::vector<Line> above, below;
  Sections(f, v, o, &above, &below);
  return RowsLeft(o, above, below);
}

std::string Render(const Frame& f, const ViewState& v, const RenderOptions& o) {
  std::vector<Line> lines, below;
  Sections(f, v, o, &lines, &below);
  Line keys(o.cols, o.color);
  keys.Add(fmt::format(" q quit  p pause  +/- period  s sort: {}  t {}  arrows scroll ",
                       SortName(v.sort), v.only_pid ? "all threads" : "this process only"),
           "7");
  keys.Fill("7");
  const int rows_left = RowsLeft(o, lines, below);
  lines.emplace_back(o.cols, o.color);
  ThreadTable(f, v, o, rows_left, &lines);
  for (auto& l : below)
    lines.push_back(std::move(l));
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (o.rows > 0 && static_cast<int>(i) >= o.rows - 1)
      break;  // the last row is the key line
    out += lines[i].str();
    out += '\n';
  }
  if (o.batch)
    return out;
  if (o.rows > 0)
    for (int i = static_cast<int>(lines.size()); i < o.rows - 1; ++i)
      out += '\n';
  out += keys.str();
  return out;
}

}  // namespace parmon::live_view
