#include "control/ui_routes.h"

#include <string>

#include "ui/assets.h"

namespace anneal {

namespace {

void SecurityHeaders(httplib::Response& res) {
  res.set_header("Content-Security-Policy", kUiContentSecurityPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Referrer-Policy", "no-referrer");
  // The files change with the binary: revalidate rather than keep an old app.js beside a new API.
  res.set_header("Cache-Control", "no-cache");
}

}  // namespace

void AddUiRoutes(httplib::Server& h) {
  h.Get(R"(/ui(/[^?]*)?)", [](const httplib::Request& req, httplib::Response& res) {
    SecurityHeaders(res);
    std::string name = req.matches[1];
    if (!name.empty()) name.erase(0, 1);  // "/app.js" -> "app.js"; "/ui" and "/ui/" -> index.html
    const UiAsset* a = FindUiAsset(name);
    if (!a) {
      res.status = 404;
      res.set_content("no dashboard file /ui/" + name + ": the dashboard starts at /ui/\n", "text/plain; charset=utf-8");
      return;
    }
    res.status = 200;
    res.set_content(std::string(a->body), std::string(a->content_type));
  });
  h.Get("/", [](const httplib::Request&, httplib::Response& res) {
    SecurityHeaders(res);
    res.set_redirect("/ui/");
  });
}

}  // namespace anneal
