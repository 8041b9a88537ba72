// The embedded UI files (ui_bundle.h), assembled into .rodata with .incbin as the HTML report's
// charting library is (src/analysis/chart_bundle.cc): no compile time, no file lookup at run time.
#include "web/ui_bundle.h"

#include <string>

#define PARMON_UI_INCBIN_(name, path)   \
  __asm__(                              \
      ".section .rodata\n"              \
      ".global " #name "_begin\n" #name \
      "_begin:\n"                       \
      ".incbin \"" path                 \
      "\"\n"                            \
      ".global " #name "_end\n" #name   \
      "_end:\n"                         \
      ".byte 0\n"                       \
      ".previous\n");                   \
  extern "C" const char name##_begin[]; \
  extern "C" const char name##_end[];

PARMON_UI_INCBIN_(parmon_ui_html, PARMON_UI_HTML_PATH)
#ifdef PARMON_UI_JS_PATH
PARMON_UI_INCBIN_(parmon_ui_js, PARMON_UI_JS_PATH)
#endif

namespace parmon::web {

namespace {

constexpr std::string_view kNotBuilt =
    "<!doctype html><html lang=\"en\" data-ui=\"missing\"><head><meta charset=\"utf-8\">"
    "<title>parmon view</title></head><body><h1>parmon view</h1><p id=\"no-ui\">This parmon was "
    "built without its web UI (npm could not install esbuild when cmake ran). The JSON API is "
    "served: <a href=\"/api/session\">/api/session</a>; docs/http-api.md describes it.</p>"
    "</body></html>\n";

}  // namespace

bool UiBuilt() {
#ifdef PARMON_UI_JS_PATH
  return true;
#else
  return false;
#endif
}

ApiResponse UiFile(std::string_view path) {
  ApiResponse r;
  if (path == "/" || path == "/index.html") {
    r.content_type = "text/html; charset=utf-8";
    r.body =
        UiBuilt() ? std::string(parmon_ui_html_begin, parmon_ui_html_end) : std::string(kNotBuilt);
    return r;
  }
#ifdef PARMON_UI_JS_PATH
  if (path == "/app.js") {
    r.content_type = "text/javascript; charset=utf-8";
    r.body.assign(parmon_ui_js_begin, parmon_ui_js_end);
    return r;
  }
#endif
  return ErrorResponse(404, "There is nothing at this path.");
}

}  // namespace parmon::web
