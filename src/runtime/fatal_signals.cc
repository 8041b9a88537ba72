// A recorded process that dies of a signal says so: one FatalSignal event (signal, si_code,
// sender) on the thread that took it, just before the signal's own action ends the process. An
// MPI rank that crashes, or a rank the launcher tears down afterwards, is then a fact in the
// trace, not a stream that merely stops (docs/events.md).
//
// Which signals: those whose default action ends the process with a fault (SIGSEGV, SIGBUS,
// SIGFPE, SIGILL, SIGABRT) and SIGTERM (how launchers such as mpirun tear ranks down). SIGINT is
// left alone: a program (Python) decides how to treat Ctrl-C by whether its action is the
// default. A handler is installed only over the default action: a program that handles or
// ignores the signal keeps its own. MPI libraries install their own fault handlers in MPI_Init
// (Open MPI prints a backtrace); the MPI wrappers then call parmon_x_watch_fatal_signals again,
// and that handler is chained: ours records, then gives the signal to it.
//
// The handler: emits, restores the previous action, and lets it take the signal. A fault (si_code
// > 0 for SIGSEGV, SIGBUS, SIGFPE, SIGILL) recurs when the faulting instruction runs again on
// return and meets the restored action; any other signal is sent again to this thread, and
// delivered with the restored action once the handler returns (it is blocked until then). The
// emit itself is the runtime's usual one: should the signal interrupt this thread's own emit (the
// process is about to die; only a program handler that recovers would see it), that one event
// could be overwritten.
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "format/kinds.h"
#include "runtime/emit.h"
#include "runtime/internal.h"

#define PARMON_EXPORT extern "C" __attribute__((visibility("default")))

namespace parmon::runtime {
namespace {

constexpr int kWatched[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM};
constexpr int kMaxSignal = 64;

// The action each watched signal had before ours (set before ours is installed; read by the
// handler). One slot per signal; watching again replaces it with the action found then.
struct sigaction g_previous[kMaxSignal + 1];

bool IsFault(int sig, const siginfo_t* info) {
  return info != nullptr && info->si_code > 0 &&
         (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL);
}

void OnFatalSignal(int sig, siginfo_t* info, void*) {
  const int saved_errno = errno;
  const int code = info != nullptr ? info->si_code : 0;
  // Sent by a process (kill, raise, abort, a launcher's teardown): who sent it.
  const uint64_t sender = info != nullptr && code <= 0 ? static_cast<uint32_t>(info->si_pid) : 0;
  const uint64_t args[3] = {static_cast<uint64_t>(sig),
                            static_cast<uint64_t>(static_cast<int64_t>(code)), sender};
  parmon_x_emit(static_cast<uint16_t>(format::Kind::kFatalSignal), args, 3, nullptr, 0);
  if (sig > 0 && sig <= kMaxSignal)
    sigaction(sig, &g_previous[sig], nullptr);
  if (!IsFault(sig, info))
    syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
  errno = saved_errno;
}

}  // namespace

void WatchFatalSignals(bool over_handlers) {
  for (int sig : kWatched) {
    struct sigaction now {};
    if (sigaction(sig, nullptr, &now) != 0)
      continue;
    const bool info = (now.sa_flags & SA_SIGINFO) != 0;
    if (info && now.sa_sigaction == OnFatalSignal)
      continue;  // ours already
    if (!info && now.sa_handler == SIG_IGN)
      continue;  // ignored: it ends nothing
    const bool is_default = !info && now.sa_handler == SIG_DFL;
    if (!is_default && !over_handlers)
      continue;  // the program's own handler (at start: none yet, short of an inherited one)
    g_previous[sig] = now;
    struct sigaction act {};
    act.sa_sigaction = OnFatalSignal;
    act.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&act.sa_mask);
    sigaction(sig, &act, nullptr);
  }
}

}  // namespace parmon::runtime

PARMON_EXPORT void parmon_x_watch_fatal_signals(void) {
  if (parmon_x_enabled())
    parmon::runtime::WatchFatalSignals(/*over_handlers=*/true);
}
