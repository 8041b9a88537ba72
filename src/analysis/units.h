// How reports write quantities: durations, byte counts, percentages, counts.
#ifndef PARMON_SRC_ANALYSIS_UNITS_H_
#define PARMON_SRC_ANALYSIS_UNITS_H_

#include <cstdint>
#include <string>

namespace parmon::analysis {

// "1.23 s", "45.6 ms", "812 us", "90 ns": three significant figures.
std::string FormatDuration(uint64_t ns);
// "1.5 GB", "12.0 MB", "512 B" (powers of 1000).
std::string FormatBytes(uint64_t bytes);
// part / whole as "91%" (or "0.4%" below 1%); "-" when whole is 0.
std::string FormatPercent(uint64_t part, uint64_t whole);
double Percent(uint64_t part, uint64_t whole);
// "12,345,678".
std::string FormatCount(uint64_t n);

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_UNITS_H_
