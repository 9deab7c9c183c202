// ClusterState: the state file of one node (<run_dir>/<node>/state.json) that
// `tandem up` writes and `tandem down` — another process, maybe much later — reads to
// stop exactly the processes that were started: the supervisor (tandem up itself) and
// each service, each with its ProcessIdentity, plus ports and log files for people.
//
// tandem up rewrites the file (atomically: a temporary file, then rename) after each
// start and when the node is ready, and removes it when everything has stopped.
//
// Thread safety: plain values and stateless functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cluster/process_identity.h"
#include "common/status.h"

namespace tandem::cluster {

struct ServiceState {
  std::string name;
  std::string kind;  // ServiceKindName
  ProcessIdentity process;
  std::map<std::string, int> ports;
  std::string log_path;
};

struct ClusterState {
  std::string cluster;
  std::string node;
  std::string status;  // "starting", "ready"
  ProcessIdentity supervisor;
  std::string logs_dir;
  std::string proxy_url;               // "" when the proxy is not on this node
  std::vector<ServiceState> services;  // in start order
};

std::string ClusterStateToJson(const ClusterState& state);
// InvalidArgument when `json_text` is not a state file.
StatusOr<ClusterState> ParseClusterState(const std::string& json_text);

// Atomic replace; Internal when the file cannot be written.
Status WriteClusterState(const std::string& path, const ClusterState& state);
// NotFound when the file does not exist.
StatusOr<ClusterState> ReadClusterState(const std::string& path);

}  // namespace tandem::cluster
