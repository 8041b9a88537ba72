/* exec_storm PROCESSES PARALLEL SIDE_FILE [EXIT_CODE]: starts PROCESSES short child processes,
 * at most PARALLEL at a time. Two in three fork and exec /bin/true; the third forks only, enters
 * and leaves the region "child" once and _exits (no exit handlers: its ring is never retired by
 * the thread, the recorder must reclaim it). SIDE_FILE gets "processes=<n> failed=<f>
 * pid=<own pid>" and then every child's pid, one a line. Exits with EXIT_CODE (default 0). */
#include <parmon/parmon.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: exec_storm PROCESSES PARALLEL SIDE_FILE [EXIT_CODE]\n");
    return 2;
  }
  int n = atoi(argv[1]), parallel = atoi(argv[2]);
  int code = argc > 4 ? atoi(argv[4]) : 0;
  parmon_id region = parmon_region_register("child");
  pid_t* pids = calloc((size_t)n, sizeof *pids);
  int running = 0, failed = 0, started = 0;
  for (int i = 0; i < n || running > 0;) {
    if (i < n && running < parallel) {
      pid_t pid = fork();
      if (pid < 0) {
        perror("fork");
        break;
      }
      if (pid == 0) {
        if (i % 3 == 2) {
          parmon_region_enter(region);
          parmon_region_leave(region);
          _exit(0);
        }
        execl("/bin/true", "true", (char*)NULL);
        _exit(126);
      }
      pids[i++] = pid;
      ++running;
      ++started;
      continue;
    }
    int status;
    if (wait(&status) < 0)
      break;
    --running;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      ++failed;
  }
  FILE* f = fopen(argv[3], "w");
  if (!f)
    return 1;
  fprintf(f, "processes=%d failed=%d pid=%d\n", started, failed, (int)getpid());
  for (int i = 0; i < started; ++i)
    fprintf(f, "%d\n", (int)pids[i]);
  fclose(f);
  return code;
}
