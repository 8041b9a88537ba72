// A minimal HTTP/1.1 client over a real socket for the web tests: one request per connection,
// the answer read until the server closes it.
#ifndef PARMON_TESTS_WEB_HTTP_CLIENT_H_
#define PARMON_TESTS_WEB_HTTP_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "live/live_support.h"
#include "support/e2e.h"

namespace parmon::testing {

struct Reply {
  int status = 0;  // 0 when no HTTP answer came
  std::string body;
};

// Sends raw bytes to 127.0.0.1:port and reads the answer until the server closes (or timeout_s).
Reply Send(int port, const std::string& raw, double timeout_s = 30);
// GET target with "Connection: close".
Reply Get(int port, const std::string& target);

// `parmon ARGS...` serving on port 0 (`parmon view`): the process and its port, read from the
// first line of its output (0 when it did not start). Output in dir/NAME.out and NAME.err.
struct View {
  std::unique_ptr<Process> proc;
  int port = 0;
};
View StartView(const TempDir& dir, const std::string& name, std::vector<std::string> args);

}  // namespace parmon::testing

#endif  // PARMON_TESTS_WEB_HTTP_CLIENT_H_
