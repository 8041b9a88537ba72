#include "cli/cli_errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace parmon::cli {
namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// CLI11's message, on one line: its errors may hold newlines and end with one.
std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

}  // namespace

std::string ClosestWord(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    size_t d = EditDistance(word, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::string ClosestOption(const CLI::App& app, const std::string& word) {
  std::string name = word.substr(0, word.find('='));
  while (!name.empty() && name.front() == '-')
    name.erase(name.begin());
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options())
    for (const std::string& candidate : opt->get_lnames())
      names.push_back(candidate);
  std::string best = ClosestWord(name, names);
  return best.empty() ? best : "--" + best;
}

int UnknownOption(const CLI::App& app, const std::string& command, const std::string& word) {
  std::string closest = ClosestOption(app, word);
  fmt::print(stderr, "parmon {}: unknown option {}{}\n", command, word,
             closest.empty() ? "" : fmt::format(" (did you mean {}?)", closest));
  return kUsageExit;
}

int ParseCommandLine(CLI::App& app, int argc, char** argv, const std::string& command) {
  try {
    app.parse(argc, argv);
    return -1;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError&) {
    // The first word nobody took: an unknown option (with a suggestion) or a stray argument.
    std::vector<std::string> extras = app.remaining();
    std::string word = extras.empty() ? std::string("?") : extras.front();
    if (word.size() > 1 && word[0] == '-')
      return UnknownOption(app, command, word);
    fmt::print(stderr, "parmon {}: unexpected argument {}\n", command, word);
    return kUsageExit;
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "parmon {}: {}\n", command, OneLine(e.what()));
    return kUsageExit;
  }
}

}  // namespace parmon::cli
