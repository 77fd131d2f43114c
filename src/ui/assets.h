// The dashboard's static files, embedded in the binary at build time (ui/assets.cc: one .incbin per
// file): src/ui/'s index.html, app.js and app.css, and uPlot's dist files (uPlot.iife.min.js,
// uPlot.min.css) from the npm package scripts/setup.sh installs into tools/npm. Nothing is read from
// disk or fetched at run time; control/ui_routes.h serves them at /ui.
// Thread-safety: immutable data, readable from any thread.
#pragma once

#include <string_view>
#include <vector>

namespace anneal {

struct UiAsset {
  std::string_view name;          // "app.js": the path under /ui/
  std::string_view content_type;  // "text/javascript; charset=utf-8"
  std::string_view body;          // the file's bytes (read-only data of the binary)
};

// Every embedded file.
const std::vector<UiAsset>& UiAssets();
// The file named (without /ui/), nullptr when there is none. "" names index.html.
const UiAsset* FindUiAsset(std::string_view name);

}  // namespace anneal
