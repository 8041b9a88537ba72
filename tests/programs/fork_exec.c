/* fork_exec: the parent emits 1000 "parent" regions, forks a child that emits 1000 "child"
 * regions and then execs `threads_regions 2 500` (found next to this program), and waits. */
#include <libgen.h>
#include <parmon/parmon.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  (void)argc;
  parmon_id parent = parmon_region_register("parent");
  for (int i = 0; i < 500; ++i) {
    parmon_region_enter(parent);
    parmon_region_leave(parent);
  }
  pid_t pid = fork();
  if (pid == 0) {
    parmon_id child = parmon_region_register("child");
    for (int i = 0; i < 500; ++i) {
      parmon_region_enter(child);
      parmon_region_leave(child);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/threads_regions", dirname(strdup(argv[0])));
    execl(path, path, "2", "500", (char*)NULL);
    perror("exec");
    _exit(1);
  }
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
