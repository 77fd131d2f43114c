// The dashboard's routes (control/ui_routes.h) on a bare HTTP server: every embedded file with its
// content type and the CSP, index.html free of inline script and style, 404 for unknown names (a
// path that climbs out included), / redirected. tests/peers/ui_test.sh drives the pages in Chromium.
#include "control/ui_routes.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <regex>
#include <thread>

#include "ui/assets.h"

namespace anneal {
namespace {

class UiRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AddUiRoutes(server_);
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  void TearDown() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Result Get(const std::string& path) {
    httplib::Client c("127.0.0.1", port_);
    return c.Get(path);
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST_F(UiRoutesTest, EveryFileHasItsTypeAndTheCsp) {
  const std::map<std::string, std::string> want = {
      {"/ui/", "text/html; charset=utf-8"},          {"/ui", "text/html; charset=utf-8"},
      {"/ui/index.html", "text/html; charset=utf-8"}, {"/ui/app.js", "text/javascript; charset=utf-8"},
      {"/ui/app.css", "text/css; charset=utf-8"},      {"/ui/uPlot.iife.min.js", "text/javascript; charset=utf-8"},
      {"/ui/uPlot.min.css", "text/css; charset=utf-8"}, {"/ui/favicon.svg", "image/svg+xml"}};
  for (const auto& [path, type] : want) {
    auto r = Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->get_header_value("Content-Type"), type) << path;
    EXPECT_EQ(r->get_header_value("Content-Security-Policy"), "default-src 'self'") << path;
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff") << path;
    EXPECT_GT(r->body.size(), 100u) << path;
  }
  EXPECT_EQ(UiAssets().size(), want.size() - 2);  // /ui and /ui/ are index.html
  EXPECT_NE(Get("/ui/uPlot.iife.min.js")->body.find("uPlot"), std::string::npos);
}

TEST_F(UiRoutesTest, IndexHasNoInlineScriptOrStyle) {
  const std::string html = Get("/ui/")->body;
  int scripts = 0;
  const std::regex script("<script([^>]*)>([^<]*)</script>");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), script);
       it != std::sregex_iterator(); ++it) {
    ++scripts;
    EXPECT_NE((*it)[1].str().find("src=\"/ui/"), std::string::npos) << (*it)[0];
    EXPECT_EQ((*it)[2].str(), "") << "inline script: " << (*it)[0];
  }
  EXPECT_EQ(scripts, 2);  // uPlot and app.js
  EXPECT_EQ(html.find("<style"), std::string::npos);
  EXPECT_EQ(html.find("style="), std::string::npos);
  EXPECT_FALSE(std::regex_search(html, std::regex("\\son[a-z]+=")));  // no onclick= and the like
}

TEST_F(UiRoutesTest, UnknownFilesAre404WithTheCsp) {
  for (const std::string path : {"/ui/nope.js", "/ui/../admin.token", "/ui/%2e%2e/anneal.db", "/ui/app.js/x", "/uix"}) {
    auto r = Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
    if (path != "/uix") {
      EXPECT_EQ(r->get_header_value("Content-Security-Policy"), "default-src 'self'") << path;
    }
  }
  EXPECT_EQ(FindUiAsset("nope"), nullptr);
  ASSERT_NE(FindUiAsset(""), nullptr);
  EXPECT_EQ(FindUiAsset("")->name, "index.html");
}

TEST_F(UiRoutesTest, RootRedirectsToTheDashboard) {
  auto r = Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 302);
  EXPECT_EQ(r->get_header_value("Location"), "/ui/");
}

}  // namespace
}  // namespace anneal
