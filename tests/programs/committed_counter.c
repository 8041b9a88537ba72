/* committed_counter SIDE_FILE: emits region enter/leave events forever (until killed). After each
 * event call returns -- the event is committed -- it stores the number of committed events in
 * SIDE_FILE through a shared mapping, so the count survives a SIGKILL at any point. It writes
 * "ready" to stdout after the first 100000 events. */
#include <fcntl.h>
#include <parmon/parmon.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2)
    return 2;
  int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ftruncate(fd, 4096) != 0)
    return 1;
  volatile uint64_t* count = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (count == MAP_FAILED)
    return 1;
  parmon_id r = parmon_region_register("tick");
  for (uint64_t i = 0;; ++i) {
    parmon_region_enter(r);
    *count = 2 * i + 1;
    parmon_region_leave(r);
    *count = 2 * i + 2;
    if (i == 50000) {
      printf("ready\n");
      fflush(stdout);
    }
  }
}
