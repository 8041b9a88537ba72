// Opening what a trace is read from when it is not a plain file: standard input ("-"), a FIFO, a
// socket or a character device. A TraceReader needs random access to decode streams in any
// order, so such an input is read once, sequentially, into an unlinked temporary file (O_TMPFILE
// in $TMPDIR, else /tmp): memory stays bounded whatever the trace's size, the bytes keep the
// offsets they had in the stream (damage messages name stream offsets), and the rest of the
// reader works on it as on a file. docs/format.md, "Reading from a pipe".
#ifndef PARMON_SRC_FORMAT_INPUT_H_
#define PARMON_SRC_FORMAT_INPUT_H_

#include <cstdint>
#include <string>

#include "base/status.h"

namespace parmon::format {

// Opens path for reading ("-" is standard input, duplicated). A FIFO that has no writer yet
// gets one line on stderr saying what parmon waits for; Ctrl-C ends the wait as usual.
StatusOr<int> OpenTraceInput(const std::string& path);

// Copies in_fd to its end into a new unlinked temporary file and returns that file's descriptor
// (positioned anywhere; read it with pread); *size is the number of bytes copied. in_fd is left
// open. name is the input's name for messages. Input whose first bytes are not the trace signature
// is copied only that far (an endless device is not read to its end).
StatusOr<int> SpoolToTempFile(int in_fd, const std::string& name, uint64_t* size);

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_INPUT_H_
