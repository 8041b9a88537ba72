/* Started by posix_gaps with posix_spawn: writes N blocks of S bytes to its standard output with
 * write(2), one call each (a pipe takes blocks up to PIPE_BUF whole). usage: spawn_child N S */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3)
    return 2;
  int n = atoi(argv[1]);
  size_t s = (size_t)atol(argv[2]);
  char buf[4096];
  if (s > sizeof buf)
    return 2;
  memset(buf, 's', s);
  for (int i = 0; i < n; ++i)
    if (write(1, buf, s) != (ssize_t)s)
      return 1;
  return 0;
}
