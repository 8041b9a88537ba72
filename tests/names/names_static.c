/* names_static: linked statically, so no libparmon is loaded into it; only the kernel (context
 * switch COMM records, or /proc for the sampler) can tell the recorder its name. Spins 400 ms
 * and prints "static PID COMM" with the name /proc/self/comm gives. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(void) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  volatile unsigned long x = 0;
  do {
    for (int i = 0; i < 10000; ++i)
      x += (unsigned long)i;
    clock_gettime(CLOCK_MONOTONIC, &b);
  } while ((double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9 < 0.4);
  char comm[64] = "";
  FILE* f = fopen("/proc/self/comm", "r");
  if (f && fgets(comm, sizeof comm, f))
    comm[strcspn(comm, "\n")] = '\0';
  if (f)
    fclose(f);
  printf("static %d %s\n", (int)getpid(), comm);
  return 0;
}
