// Shared by the fuzz targets: what every consumer does with a session (the work of `info`,
// `dump` and `report` without the printing), and a scratch directory for the files a target
// makes from its input. Each target is a libFuzzer entry point built by the `fuzz` preset with
// AddressSanitizer and UndefinedBehaviorSanitizer (docs/fuzzing.md).
#ifndef PARMON_FUZZ_FUZZ_COMMON_H_
#define PARMON_FUZZ_FUZZ_COMMON_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace parmon::fuzz {

// A directory of this process's own, made once and emptied by the caller's files.
const std::string& ScratchDir();

// Writes bytes to path (replacing it).
void WriteFile(const std::string& path, const uint8_t* data, size_t size);

// Opens path as a session and runs every consumer over it: the merge by time (pull and push),
// the analysis of the whole session with damaged chunks allowed and of a window, and every report
// view. Bad input must give a Status, never a crash, hang or an allocation past the bound.
void ConsumeSession(const std::string& path);

}  // namespace parmon::fuzz

#endif  // PARMON_FUZZ_FUZZ_COMMON_H_
