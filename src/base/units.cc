#include "base/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <initializer_list>

namespace parmon {
namespace {

// Splits "2.5ms" into 2.5 and "ms"; false when there is no leading non-negative number.
bool SplitNumber(std::string_view text, double* value, std::string* unit) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0)
    return false;
  auto r = std::from_chars(text.data(), text.data() + i, *value);
  if (r.ec != std::errc() || r.ptr != text.data() + i || !std::isfinite(*value))
    return false;
  unit->clear();
  for (char c : text.substr(i))
    unit->push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return true;
}

std::string Quoted(std::string_view what, std::string_view text) {
  std::string s(what);
  s += " '";
  s += text;
  s += "'";
  return s;
}

std::string OneDecimal(double v, const char* unit) {
  char buf[48];
  snprintf(buf, sizeof buf, "%.1f %s", v, unit);
  return buf;
}

}  // namespace

namespace {

struct UnitName {
  const char* name;  // lower case
  double multiplier;
};

// "Number unit" with the unit one of `units`; the messages say what a good value looks like.
StatusOr<double> ParseScaled(std::string_view text,
                             std::string_view what,
                             std::initializer_list<UnitName> units,
                             const char* not_a_value,
                             const char* unknown_unit) {
  double v = 0;
  std::string unit;
  if (!SplitNumber(text, &v, &unit))
    return Status::Error(Quoted(what, text) + not_a_value);
  for (const UnitName& u : units) {
    if (unit != u.name)
      continue;
    if (v * u.multiplier >= 18e18)
      return Status::Error(Quoted(what, text) + " is too large");
    return v * u.multiplier;
  }
  return Status::Error(Quoted(what, text) + unknown_unit);
}

}  // namespace

StatusOr<uint64_t> ParseSize(std::string_view text, std::string_view what) {
  constexpr double kKi = 1024.0;
  PARMON_ASSIGN_OR_RETURN(
      double bytes, ParseScaled(text, what,
                                {{"", 1},
                                 {"b", 1},
                                 {"k", kKi},
                                 {"kb", kKi},
                                 {"kib", kKi},
                                 {"m", kKi * kKi},
                                 {"mb", kKi * kKi},
                                 {"mib", kKi * kKi},
                                 {"g", kKi * kKi * kKi},
                                 {"gb", kKi * kKi * kKi},
                                 {"gib", kKi * kKi * kKi}},
                                " is not a size (try 4M, 512K or 1GiB)",
                                " has an unknown unit (sizes take K, M or G, all powers of 1024)"));
  return static_cast<uint64_t>(bytes);
}

StatusOr<uint64_t> ParseDuration(std::string_view text, std::string_view what) {
  PARMON_ASSIGN_OR_RETURN(
      double ns,
      ParseScaled(
          text, what,
          {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"", 1e9}, {"m", 60e9}, {"min", 60e9}},
          " is not a duration (try 10ms, 2.5s or 500us)",
          " has an unknown unit (durations take ns, us, ms, s or min)"));
  return static_cast<uint64_t>(std::llround(ns));
}

namespace {

// A parsed value checked against [min, max]; the error names both bounds in the value's unit.
StatusOr<uint64_t> InRange(StatusOr<uint64_t> v,
                           std::string_view text,
                           std::string_view what,
                           uint64_t min,
                           uint64_t max,
                           std::string (*format)(uint64_t)) {
  if (v.ok() && (*v < min || *v > max))
    return Status::Error(Quoted(what, text) + " is outside " + format(min) + " to " + format(max));
  return v;
}

}  // namespace

StatusOr<uint64_t> ParseSizeInRange(std::string_view text,
                                    std::string_view what,
                                    uint64_t min,
                                    uint64_t max) {
  return InRange(ParseSize(text, what), text, what, min, max, FormatBytes);
}

StatusOr<uint64_t> ParseDurationInRange(std::string_view text,
                                        std::string_view what,
                                        uint64_t min_ns,
                                        uint64_t max_ns) {
  return InRange(ParseDuration(text, what), text, what, min_ns, max_ns, FormatDuration);
}

std::string FormatBytes(uint64_t b) {
  if (b >= (1ull << 30))
    return OneDecimal(static_cast<double>(b) / (1ull << 30), "GiB");
  if (b >= (1ull << 20))
    return OneDecimal(static_cast<double>(b) / (1ull << 20), "MiB");
  if (b >= (1ull << 10))
    return OneDecimal(static_cast<double>(b) / (1ull << 10), "KiB");
  return std::to_string(b) + " B";
}

std::string FormatDuration(uint64_t ns) {
  struct Unit {
    uint64_t ns;
    const char* name;
  };
  for (Unit u : {Unit{60'000'000'000, "min"}, Unit{1'000'000'000, "s"}, Unit{1'000'000, "ms"},
                 Unit{1'000, "us"}}) {
    if (ns < u.ns)
      continue;
    if (ns % u.ns == 0)
      return std::to_string(ns / u.ns) + " " + u.name;
    return OneDecimal(static_cast<double>(ns) / static_cast<double>(u.ns), u.name);
  }
  return std::to_string(ns) + " ns";
}

std::string Plural(uint64_t n, std::string_view one, std::string_view many) {
  std::string s = std::to_string(n) + " ";
  if (n == 1)
    return s.append(one);
  if (many.empty())
    return s.append(one).append("s");
  return s.append(many);
}

std::string FormatCount(uint64_t n) {
  char buf[32];
  if (n >= 1000000) {
    snprintf(buf, sizeof buf, "%.1fM", static_cast<double>(n) / 1e6);
    return buf;
  }
  if (n >= 1000) {
    snprintf(buf, sizeof buf, "%.1fk", static_cast<double>(n) / 1e3);
    return buf;
  }
  return std::to_string(n);
}

}  // namespace parmon
