// seccomp_no_perf PROGRAM [ARGS...]: runs PROGRAM with perf_event_open failing with EACCES, as a
// locked-down container or kernel would refuse it, to test that parmon says so and goes on.
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: seccomp_no_perf PROGRAM [ARGS...]\n");
    return 2;
  }
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(perf_event_open), 0) != 0 ||
      seccomp_load(ctx) != 0) {
    fprintf(stderr, "seccomp_no_perf: cannot install the seccomp filter\n");
    return 1;
  }
  seccomp_release(ctx);
  execvp(argv[1], argv + 1);
  perror("seccomp_no_perf: exec");
  return 127;
}
