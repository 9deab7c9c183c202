// The per-node process plan of `tandem launch`: the contract of vllm-ascend's
// `launch_online_dp.py` (the deployment docs/DEPLOY.md describes starts its ranks with
// it), unchanged.
//
// Local rank i (0 <= i < dp_size_local) runs
//   bash TEMPLATE VISIBLE_DEVICES PORT DP_SIZE DP_RANK DP_ADDRESS RPC_PORT TP_SIZE
// with DP_RANK = dp_rank_start + i, PORT = vllm_start_port + i and VISIBLE_DEVICES the
// comma-separated ids i*tp_size .. (i+1)*tp_size-1 (accelerators under vllm-ascend; on CPU
// the template passes them to --cpu-affinity as core ids).
//
// Thread safety: pure functions and value types.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace tandem::ops {

struct LaunchOptions {
  int dp_size = 0;                    // data-parallel ranks over all nodes; required (>= 1)
  int tp_size = 1;                    // devices (cores) per rank
  int dp_size_local = -1;             // ranks on this node; -1 = dp_size
  int dp_rank_start = 0;              // global rank of this node's first rank
  std::string dp_address;             // the DP master node's address; required
  std::string dp_rpc_port = "12345";  // a string, as launch_online_dp.py takes it
  int vllm_start_port = 9000;         // engine port of local rank 0
  std::string template_path = "./run_dp_template.sh";
};

struct RankLaunch {
  int local_index = 0;
  int dp_rank = 0;
  int port = 0;
  std::string visible_devices;    // "0,1,2,3"
  std::vector<std::string> argv;  // {"bash", template, devices, port, ...}
};

// One entry per local rank. InvalidArgument when the options are inconsistent (sizes
// below 1, local ranks beyond dp_size, ports beyond 65535, no dp_address).
StatusOr<std::vector<RankLaunch>> PlanLaunch(const LaunchOptions& options);

}  // namespace tandem::ops
