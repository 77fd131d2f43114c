// GET /ui, /ui/ and /ui/<file>: the dashboard (docs/observability.md "Dashboard"), a one-page app of
// static files embedded in the binary (ui/assets.h). The pages need no token: they hold none of the
// data, which they read from the API (/v1) with the token the user signs in with. Every answer,
// a 404 included, carries `Content-Security-Policy: default-src 'self'` (no inline script or style,
// nothing from another origin), X-Content-Type-Options: nosniff and X-Frame-Options: DENY; GET /
// redirects to /ui/.
#pragma once

#include <httplib.h>

namespace anneal {

// The CSP of every /ui answer.
inline constexpr const char* kUiContentSecurityPolicy = "default-src 'self'";

void AddUiRoutes(httplib::Server& h);

}  // namespace anneal
