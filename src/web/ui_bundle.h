// The browser side of `parmon view`, embedded in the binary (src/web/CMakeLists.txt): the page
// (web/ui/index.html, always) and the script esbuild bundles from web/ui/*.ts (when npm could
// install esbuild at configure time). Without the script the page says the UI was not built.
#ifndef PARMON_SRC_WEB_UI_BUNDLE_H_
#define PARMON_SRC_WEB_UI_BUNDLE_H_

#include <string_view>

#include "web/api.h"

namespace parmon::web {

// Whether the script was bundled into this binary.
bool UiBuilt();
// The answer for a path that is not under /api/ ("/", "/app.js"), or a 404.
ApiResponse UiFile(std::string_view path);

}  // namespace parmon::web

#endif  // PARMON_SRC_WEB_UI_BUNDLE_H_
