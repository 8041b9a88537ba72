// The charting library for HTML reports and the chart code the report shares with parmon view's
// UI (web/ui/shared.ts, bundled by esbuild), embedded in the binary at build time (see
// CMakeLists.txt): the files are assembled into .rodata with .incbin, so the 1 MB of minified
// JavaScript costs no compile time and no runtime file lookup.
#include "analysis/views.h"

#if defined(PARMON_CHART_JS_PATH) && defined(PARMON_SHARED_JS_PATH)
__asm__(
    ".section .rodata\n"
    ".global parmon_chart_js_begin\n"
    "parmon_chart_js_begin:\n"
    ".incbin \"" PARMON_CHART_JS_PATH
    "\"\n"
    ".global parmon_chart_js_end\n"
    "parmon_chart_js_end:\n"
    ".byte 0\n"
    ".global parmon_shared_js_begin\n"
    "parmon_shared_js_begin:\n"
    ".incbin \"" PARMON_SHARED_JS_PATH
    "\"\n"
    ".global parmon_shared_js_end\n"
    "parmon_shared_js_end:\n"
    ".byte 0\n"
    ".previous\n");
extern "C" const char parmon_chart_js_begin[];
extern "C" const char parmon_chart_js_end[];
extern "C" const char parmon_shared_js_begin[];
extern "C" const char parmon_shared_js_end[];
#endif

namespace parmon::analysis {

std::string BundledChartLibrary() {
#if defined(PARMON_CHART_JS_PATH) && defined(PARMON_SHARED_JS_PATH)
  return std::string(parmon_chart_js_begin, parmon_chart_js_end) + "\n" +
         std::string(parmon_shared_js_begin, parmon_shared_js_end);
#else
  return "";
#endif
}

}  // namespace parmon::analysis
