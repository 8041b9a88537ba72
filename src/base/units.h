// One unit convention for every subcommand's options (record, report, dump, ...).
//
// Sizes on the command line are memory sizes (rings, flight-recorder budgets), so every size unit
// is binary: K, KB, KiB = 1024 bytes; M, MB, MiB = 1024^2; G, GB, GiB = 1024^3 (case of the
// letter does not matter, a bare number is bytes). The recorder never prints a binary figure
// with a decimal label: FormatBytes writes KiB/MiB/GiB. Durations take ns, us, ms, s (also a bare
// number, meaning seconds) and m/min; fractions are allowed (2.5s).
//
// Parsing returns one plain sentence on bad input, naming the option, so every caller reports
// errors the same way.
#ifndef PARMON_SRC_BASE_UNITS_H_
#define PARMON_SRC_BASE_UNITS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace parmon {

// "4M", "512KiB", "1.5G", "4096" -> bytes. `what` names the option in the error ("--buffer-size").
StatusOr<uint64_t> ParseSize(std::string_view text, std::string_view what);
// "10ms", "2.5s", "500us", "1m" -> nanoseconds.
StatusOr<uint64_t> ParseDuration(std::string_view text, std::string_view what);
// A size that must lie in [min, max] (one sentence naming both bounds otherwise).
StatusOr<uint64_t> ParseSizeInRange(std::string_view text,
                                    std::string_view what,
                                    uint64_t min,
                                    uint64_t max);
StatusOr<uint64_t> ParseDurationInRange(std::string_view text,
                                        std::string_view what,
                                        uint64_t min_ns,
                                        uint64_t max_ns);

// 1536 -> "1.5 KiB", 4194304 -> "4.0 MiB", 100 -> "100 B".
std::string FormatBytes(uint64_t bytes);
// 1500000 -> "1.5 ms", 2000000000 -> "2 s" (shortest exact-enough spelling, one decimal at most).
std::string FormatDuration(uint64_t ns);
// 1234567 -> "1.2M", 1500 -> "1.5k", 999 -> "999".
std::string FormatCount(uint64_t n);
// The count and the noun, singular for 1: Plural(1, "event") -> "1 event", Plural(3, "event")
// -> "3 events" (nouns whose plural is not noun+"s" pass it: Plural(n, "process", "processes")).
std::string Plural(uint64_t n, std::string_view one, std::string_view many = {});

}  // namespace parmon

#endif  // PARMON_SRC_BASE_UNITS_H_
