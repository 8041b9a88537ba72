#include "analysis/units.h"

#include <fmt/format.h>

namespace parmon::analysis {
namespace {

std::string ThreeFigures(double v, const char* unit) {
  if (v >= 100)
    return fmt::format("{:.0f} {}", v, unit);
  if (v >= 10)
    return fmt::format("{:.1f} {}", v, unit);
  return fmt::format("{:.2f} {}", v, unit);
}

}  // namespace

std::string FormatDuration(uint64_t ns) {
  double v = static_cast<double>(ns);
  if (ns >= 1000000000ull)
    return ThreeFigures(v / 1e9, "s");
  if (ns >= 1000000ull)
    return ThreeFigures(v / 1e6, "ms");
  if (ns >= 1000ull)
    return ThreeFigures(v / 1e3, "us");
  return fmt::format("{} ns", ns);
}

std::string FormatBytes(uint64_t bytes) {
  double v = static_cast<double>(bytes);
  if (bytes >= 1000000000ull)
    return ThreeFigures(v / 1e9, "GB");
  if (bytes >= 1000000ull)
    return ThreeFigures(v / 1e6, "MB");
  if (bytes >= 1000ull)
    return ThreeFigures(v / 1e3, "kB");
  return fmt::format("{} B", bytes);
}

double Percent(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0;
}

std::string FormatPercent(uint64_t part, uint64_t whole) {
  if (!whole)
    return "-";
  double p = Percent(part, whole);
  if (p > 0 && p < 1)
    return fmt::format("{:.1f}%", p);
  return fmt::format("{:.0f}%", p);
}

std::string FormatCount(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace parmon::analysis
