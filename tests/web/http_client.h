// A minimal HTTP/1.1 client over a real socket for the web tests: one request per connection,
// the answer read until the server closes it.
#ifndef PARMON_TESTS_WEB_HTTP_CLIENT_H_
#define PARMON_TESTS_WEB_HTTP_CLIENT_H_

#include <string>

namespace parmon::testing {

struct Reply {
  int status = 0;  // 0 when no HTTP answer came
  std::string body;
};

// Sends raw bytes to 127.0.0.1:port and reads the answer until the server closes (or timeout_s).
Reply Send(int port, const std::string& raw, double timeout_s = 30);
// GET target with "Connection: close".
Reply Get(int port, const std::string& target);

}  // namespace parmon::testing

#endif  // PARMON_TESTS_WEB_HTTP_CLIENT_H_
