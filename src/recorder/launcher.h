// The launcher: everything about the processes of a session, none of it about events. It finds
// libparmon and the preload families, forks and execs the command with them injected (the child
// waits until the recorder's sources have seen its pid), checks a process given with -p, routes
// signals through a signalfd so the recorder's loop can forward them, and reaps children.
// MPI launches (one recorder per rank, rank files, the MPI wrapper library) are in mpi_launch.h.
#ifndef PARMON_SRC_RECORDER_LAUNCHER_H_
#define PARMON_SRC_RECORDER_LAUNCHER_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace parmon::recorder {

// Where libparmon.so is: $PARMON_LIB_DIR, <exe>/../lib (build tree), <exe>/../<install libdir>,
// <exe>.
std::string LibDir();
// The LD_PRELOAD value: the extra libraries (bare names are looked up beside libparmon; missing
// libparmon_* families are skipped, they are optional), libparmon.so, then any LD_PRELOAD of ours.
StatusOr<std::string> PreloadList(const std::vector<std::string>& extra_preload);

// Forks argv with PARMON_SHM=segment_name and LD_PRELOAD=preload, calls on_created(pid) while the
// child waits, then lets it exec. Fails with a sentence when the command cannot be run.
StatusOr<pid_t> StartCommand(const std::vector<std::string>& argv,
                             const std::string& segment_name,
                             const std::string& preload,
                             const std::function<void(pid_t)>& on_created);
// Whether -p PID names a process we may follow (exists, ours, not a zombie, not us).
Status CheckAttachable(pid_t pid);
// The command line (/proc/PID/cmdline, one entry per argument) and parent of a running process,
// for a session attached to it; empty and 0 when they cannot be read (it ended, a kernel thread).
struct AttachedProcess {
  std::vector<std::string> argv;
  pid_t ppid = 0;
};
AttachedProcess DescribeProcess(pid_t pid);
// A process we did not start: alive until it is gone (or a zombie nobody reaped yet).
bool ProcessAlive(pid_t pid);

// Blocks SIGCHLD/INT/TERM/HUP/QUIT and returns a non-blocking signalfd for them; makes the
// recorder the subreaper of the command's orphans so the session follows all its processes.
int OpenSignalChannel();

// A small /proc file (a task's comm or stat), read with read(2): a task that exits meanwhile
// gives what came before instead of an exception. Trailing newlines and NULs are removed.
std::string ReadProcFile(const std::string& path);

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_LAUNCHER_H_
