// Fuzz target: one trace file, as `parmon info|dump|report FILE` and `... -` read it. The input
// is the file's bytes; the same bytes are read from the file (seekable, with its index) and as a
// chunk stream (no seek: what a pipe or a socket gives).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "format/chunk_stream.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parmon;
  const std::string path = fuzz::ScratchDir() + "/input.ptrace";
  fuzz::WriteFile(path, data, size);
  fuzz::ConsumeSession(path);

  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  format::ChunkStream stream(fd, "input");
  format::FileHeader header;
  if (stream.ReadFileHeader(&header).ok()) {
    format::StreamChunk chunk;
    while (stream.Next(&chunk)) {
    }
  }
  close(fd);
  return 0;
}
