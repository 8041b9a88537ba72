#include "analysis/units.h"

#include <array>

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

// v in the largest of units[1..3] (1000, 10^6, 10^9 of units[0]) it reaches, to three figures;
// below 1000, the whole number in units[0]. Reports count in 1000s, like the units they print.
std::string Scaled(uint64_t v, const std::array<const char*, 4>& units) {
  double d = static_cast<double>(v);
  if (v >= 1000000000ull)
    return ThreeFigures(d / 1e9, units[3]);
  if (v >= 1000000ull)
    return ThreeFigures(d / 1e6, units[2]);
  if (v >= 1000ull)
    return ThreeFigures(d / 1e3, units[1]);
  return fmt::format("{} {}", v, units[0]);
}

}  // namespace

std::string FormatDuration(uint64_t ns) {
  return Scaled(ns, {"ns", "us", "ms", "s"});
}

std::string FormatBytes(uint64_t bytes) {
  return Scaled(bytes, {"B", "kB", "MB", "GB"});
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
