// The web tests' HTTP client (http_client.h).
#include "web/http_client.h"

#include <poll.h>
#include <unistd.h>

#include <chrono>

#include "live/live_support.h"

namespace parmon::testing {

Reply Send(int port, const std::string& raw, double timeout_s) {
  Reply r;
  int fd = ConnectTo(port);
  if (fd < 0)
    return r;
  size_t off = 0;
  while (off < raw.size()) {
    ssize_t n = write(fd, raw.data() + off, raw.size() - off);
    if (n <= 0)
      break;  // the server may close before reading everything (a refused body)
    off += static_cast<size_t>(n);
  }
  std::string in;
  char buf[65536];
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0)
      continue;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0)
      break;
    in.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (in.rfind("HTTP/1.1 ", 0) == 0)
    r.status = std::stoi(in.substr(9, 3));
  const size_t body = in.find("\r\n\r\n");
  if (body != std::string::npos)
    r.body = in.substr(body + 4);
  return r;
}

Reply Get(int port, const std::string& target) {
  return Send(port, "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

View StartView(const TempDir& dir, const std::string& name, std::vector<std::string> args) {
  args.insert(args.begin(), ParmonBin());
  View v;
  v.proc = std::make_unique<Process>(args, dir.File(name + ".out"), dir.File(name + ".err"));
  WaitFor([&] { return v.proc->Out().find('\n') != std::string::npos || !v.proc->Running(); }, 120);
  const std::string prefix = "parmon view: http://127.0.0.1:";
  const std::string out = v.proc->Out();
  if (out.rfind(prefix, 0) == 0)
    v.port = std::stoi(out.substr(prefix.size()));
  return v;
}

}  // namespace parmon::testing
