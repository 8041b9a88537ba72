// Views of Results: every output format renders the same data model, so what the text shows the
// JSON carries (docs/report-json.md lists the JSON schema).
#ifndef PARMON_SRC_ANALYSIS_VIEWS_H_
#define PARMON_SRC_ANALYSIS_VIEWS_H_

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "analysis/results.h"

namespace parmon::analysis {

struct TextOptions {
  bool color = false;
  size_t max_locations = 64;  // longer lists are cut (the JSON has them all)
};

std::string RenderText(const Results& r, const TextOptions& options = {});
// The sentences the text and HTML views share: "3 events were lost" ("1 event was lost"), and what
// a damaged or unclosed trace is missing: an unclosed one says up to when it covers the run and
// that what came after is unknown, not "0 missing". Empty when the trace is whole.
std::string LostSentence(uint64_t lost_events);
std::string DamageSentence(const Summary& s);
// The switch-record budget's stop, in one sentence ("context-switch records stopped at 420 ms
// after 123,456 records: ..."), shared by the text, HTML and JSON views.
std::string SwitchStopSentence(const Summary& s, const Summary::SwitchStop& stop);
nlohmann::json ToJson(const Results& r);
// Several tables in one file, each introduced by a "# table: NAME" line and a header row.
std::string RenderCsv(const Results& r);
// One self-contained HTML file. chart_js is the charting library's minified source, inlined; when
// it is empty the page says that it has no charts and shows the tables only.
std::string RenderHtml(const Results& r, const std::string& chart_js);
// Text as HTML element content or attribute value (< > & " escaped).
std::string HtmlEscape(std::string_view text);

// The charting library bundled at build time (web/) followed by the chart code the report shares
// with parmon view's UI (web/ui/shared.ts as the global parmonShared), or "" when the build had
// no npm.
std::string BundledChartLibrary();

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_VIEWS_H_
