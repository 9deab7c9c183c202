// The --api-key check of `tandem serve` and `tandem proxy` (docs/SECURITY.md).
//
// A request is authorized when it carries "Authorization: Bearer <key>" (the scheme
// in any case, the key exactly). The key is compared in constant time, so it cannot
// be found byte by byte from response timings. With an API key set every route needs
// it; the operator may open the health and metrics routes (HealthOrMetricsPath) to
// unauthenticated scrapers and load balancers (--no-auth-health-metrics).
//
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include "net/http_request.h"
#include "net/secret_equals.h"  // SecretEquals, which the key check uses

namespace tandem::net {

// True when `key` is empty (no authentication) or `request` carries it as a Bearer token.
bool HasApiKey(const HttpRequest& request, std::string_view key);

// /health, /healthcheck, /ping, /metrics and /version: the routes that
// --no-auth-health-metrics exempts from the API key.
bool HealthOrMetricsPath(std::string_view path);

}  // namespace tandem::net
