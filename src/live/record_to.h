// `parmon record --to HOST:PORT[/NAME]`: the few steps around the recorder that stream its
// session (live/forwarder.h). The recorder itself is unchanged: it writes its file (-o, or a
// spool file under $TMPDIR when no -o is given) and the forwarder tails that file.
#ifndef PARMON_SRC_LIVE_RECORD_TO_H_
#define PARMON_SRC_LIVE_RECORD_TO_H_

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "live/forwarder.h"

namespace parmon::live {

struct RecordToArgs {
  std::string to;              // HOST:PORT[/NAME]
  std::string linger = "30s";  // --to-linger
  std::string token_file;      // --token-file (else $PARMON_TOKEN_FILE)
};

// The local file of a --to recording without -o: $TMPDIR/parmon-spool-<pid>.ptrace.
std::string SpoolPath();
// Checks the arguments, names the session (NAME, else the command and the recorder's pid, or the
// MPI job id for a per-rank session) and starts the forwarder on the local file `path`. handler
// answers CONTROL commands from `parmon ctl` (none: every command is "unknown command").
StatusOr<std::unique_ptr<Forwarder>> StartStreaming(const RecordToArgs& args,
                                                    const std::string& path,
                                                    const std::vector<std::string>& command,
                                                    int attach_pid,
                                                    ControlHandler handler = nullptr);
// After the recording: delivers the rest (bounded by --to-linger) and says on stderr where the
// session is. Ok when the collector holds all of it.
Status FinishStreaming(Forwarder& forwarder, const std::string& path, bool spooled);

}  // namespace parmon::live

#endif  // PARMON_SRC_LIVE_RECORD_TO_H_
