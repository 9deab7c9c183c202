// One attempt of a ReadinessCheck (node_plan.h): the HTTP GET or the pool worker's
// liveness file. `tandem up` repeats it until the service is ready or its time is up.
//
// Thread safety: as HttpClient (any thread, not from the client's own I/O threads).
#pragma once

#include "cluster/node_plan.h"
#include "common/status.h"
#include "net/http_client.h"

namespace tandem::cluster {

// OK when ready (an HTTP check sends the Bearer key of check.api_key_env when that
// variable is set); Unavailable with the reason ("connection refused", "status 503",
// "body lacks \"ok\"", "no liveness file ...") otherwise.
Status ProbeOnce(const ReadinessCheck& check, net::HttpClient& http);

}  // namespace tandem::cluster
