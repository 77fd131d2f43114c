// The dashboard's files as read-only data: each file's bytes between two symbols, placed by the
// assembler's .incbin at build time (as data/vocab_blobs.cc embeds the tokenizers' vocabularies). The
// folders come from CMake: ANNEAL_UI_DIR (src/ui) and ANNEAL_UPLOT_DIR (uPlot's dist/ in tools/npm);
// src/CMakeLists.txt lists every file as a dependency, so an edited file rebuilds this one.
#include "ui/assets.h"

#if !defined(ANNEAL_UI_DIR) || !defined(ANNEAL_UPLOT_DIR)
#error "ANNEAL_UI_DIR and ANNEAL_UPLOT_DIR must name the dashboard's folders"
#endif

#define ANNEAL_UI_BLOB(sym, path)                                                                         \
  asm(".section .rodata\n.global " #sym "\n.global " #sym "_end\n" #sym ":\n.incbin \"" path "\"\n" #sym \
      "_end:\n.byte 0\n.previous\n");                                                                     \
  extern "C" const char sym[];                                                                            \
  extern "C" const char sym##_end[];

ANNEAL_UI_BLOB(anneal_ui_index_html, ANNEAL_UI_DIR "/index.html")
ANNEAL_UI_BLOB(anneal_ui_app_js, ANNEAL_UI_DIR "/app.js")
ANNEAL_UI_BLOB(anneal_ui_app_css, ANNEAL_UI_DIR "/app.css")
ANNEAL_UI_BLOB(anneal_ui_favicon_svg, ANNEAL_UI_DIR "/favicon.svg")
ANNEAL_UI_BLOB(anneal_ui_uplot_js, ANNEAL_UPLOT_DIR "/uPlot.iife.min.js")
ANNEAL_UI_BLOB(anneal_ui_uplot_css, ANNEAL_UPLOT_DIR "/uPlot.min.css")

namespace anneal {

namespace {

std::string_view Bytes(const char* begin, const char* end) {
  return std::string_view(begin, static_cast<size_t>(end - begin));
}

constexpr std::string_view kHtml = "text/html; charset=utf-8";
constexpr std::string_view kJs = "text/javascript; charset=utf-8";
constexpr std::string_view kCss = "text/css; charset=utf-8";

}  // namespace

const std::vector<UiAsset>& UiAssets() {
  static const std::vector<UiAsset> assets = {
      {"index.html", kHtml, Bytes(anneal_ui_index_html, anneal_ui_index_html_end)},
      {"app.js", kJs, Bytes(anneal_ui_app_js, anneal_ui_app_js_end)},
      {"app.css", kCss, Bytes(anneal_ui_app_css, anneal_ui_app_css_end)},
      {"favicon.svg", "image/svg+xml", Bytes(anneal_ui_favicon_svg, anneal_ui_favicon_svg_end)},
      {"uPlot.iife.min.js", kJs, Bytes(anneal_ui_uplot_js, anneal_ui_uplot_js_end)},
      {"uPlot.min.css", kCss, Bytes(anneal_ui_uplot_css, anneal_ui_uplot_css_end)},
  };
  return assets;
}

const UiAsset* FindUiAsset(std::string_view name) {
  if (name.empty()) name = "index.html";
  for (const UiAsset& a : UiAssets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

}  // namespace anneal
