#include "sched/proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

namespace parmon::sched {

ProcFile::ProcFile(const std::string& path) {
  fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

ProcFile::~ProcFile() {
  if (fd_ >= 0)
    close(fd_);
}

ProcFile::ProcFile(ProcFile&& other) noexcept : fd_(other.fd_) {
  other.fd_ = -1;
}

ProcFile& ProcFile::operator=(ProcFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

std::string_view ProcFile::Read() {
  if (fd_ < 0)
    return {};
  // /proc/stat of a machine with hundreds of CPUs runs to tens of KiB; a thread's files to a few
  // hundred bytes.
  thread_local std::vector<char> buf(64 * 1024);
  ssize_t n = pread(fd_, buf.data(), buf.size(), 0);
  if (n <= 0)
    return {};
  return std::string_view(buf.data(), static_cast<size_t>(n));
}

std::string ReadProcFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return {};
  std::string out;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

namespace {

// Splits the next space-separated field off the front of *text.
std::string_view NextField(std::string_view* text) {
  size_t b = text->find_first_not_of(" \t\n");
  if (b == std::string_view::npos) {
    *text = {};
    return {};
  }
  size_t e = text->find_first_of(" \t\n", b);
  if (e == std::string_view::npos)
    e = text->size();
  std::string_view f = text->substr(b, e - b);
  text->remove_prefix(e);
  return f;
}

template <typename T>
bool ToNumber(std::string_view s, T* out, int base = 10) {
  if (s.empty())
    return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

bool ParseTaskStat(std::string_view text, TaskStat* out) {
  // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  size_t close = text.rfind(')');
  size_t open = text.find('(');
  if (close == std::string_view::npos || open == std::string_view::npos || open > close)
    return false;
  out->comm.assign(text.substr(open + 1, close - open - 1));
  std::string_view rest = text.substr(close + 1);
  std::string_view f[37];  // fields 3..39
  for (auto& x : f) {
    x = NextField(&rest);
    if (x.empty())
      return false;
  }
  auto at = [&](int field) { return f[field - 3]; };
  out->state = at(3)[0];
  int64_t processor = -1;
  return ToNumber(at(4), &out->ppid) && ToNumber(at(14), &out->utime_ticks) &&
         ToNumber(at(15), &out->stime_ticks) && ToNumber(at(20), &out->num_threads) &&
         ToNumber(at(22), &out->start_ticks) && ToNumber(at(39), &processor) &&
         (out->processor = static_cast<int32_t>(processor), true);
}

bool ParseSchedStat(std::string_view text, SchedStat* out) {
  return ToNumber(NextField(&text), &out->cpu_ns) &&
         ToNumber(NextField(&text), &out->run_delay_ns) &&
         ToNumber(NextField(&text), &out->run_count);
}

bool ParseSyscall(std::string_view text, uint64_t* nr) {
  std::string_view first = NextField(&text);
  if (first == "running" || first == "-1") {
    *nr = kNoSyscall;
    return true;
  }
  return ToNumber(first, nr);
}

bool ParseStatusSwitches(std::string_view text, SwitchCounters* out) {
  int found = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    uint64_t* target = nullptr;
    if (line.starts_with("voluntary_ctxt_switches:"))
      target = &out->voluntary;
    else if (line.starts_with("nonvoluntary_ctxt_switches:"))
      target = &out->involuntary;
    if (!target)
      continue;
    line.remove_prefix(line.find(':') + 1);
    if (!ToNumber(NextField(&line), target))
      return false;
    ++found;
  }
  return found == 2;
}

bool ParseProcStat(std::string_view text, std::vector<CpuTimes>* out) {
  out->clear();
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.starts_with("cpu") || line.size() < 4 || line[3] < '0' || line[3] > '9')
      continue;
    std::string_view name = NextField(&line);
    CpuTimes c;
    if (!ToNumber(name.substr(3), &c.cpu))
      return false;
    // user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    uint64_t v[8] = {};
    for (auto& x : v)
      if (!ToNumber(NextField(&line), &x))
        return false;
    c.busy = v[0] + v[1] + v[2] + v[5] + v[6];
    c.idle = v[3];
    c.iowait = v[4];
    c.steal = v[7];
    out->push_back(c);
  }
  return !out->empty();
}

uint64_t NsPerClockTick() {
  static const uint64_t ns = [] {
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? 1'000'000'000ull / static_cast<uint64_t>(hz) : 10'000'000ull;
  }();
  return ns;
}

std::vector<uint32_t> ListTasks(uint32_t pid) {
  std::vector<uint32_t> out;
  std::string path = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = opendir(path.c_str());
  if (!d)
    return out;
  while (dirent* de = readdir(d)) {
    uint32_t tid;
    if (ToNumber(std::string_view(de->d_name), &tid))
      out.push_back(tid);
  }
  closedir(d);
  return out;
}

std::vector<uint32_t> ListChildren(uint32_t pid, uint32_t tid) {
  std::vector<uint32_t> out;
  std::string text =
      ReadProcFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/children");
  std::string_view rest = text;
  for (std::string_view f = NextField(&rest); !f.empty(); f = NextField(&rest)) {
    uint32_t child;
    if (ToNumber(f, &child))
      out.push_back(child);
  }
  return out;
}

}  // namespace parmon::sched
