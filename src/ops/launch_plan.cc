#include "ops/launch_plan.h"

namespace tandem::ops {

StatusOr<std::vector<RankLaunch>> PlanLaunch(const LaunchOptions& o) {
  if (o.dp_size < 1) return InvalidArgumentError("--dp-size must be at least 1");
  if (o.tp_size < 1) return InvalidArgumentError("--tp-size must be at least 1");
  const int local = o.dp_size_local == -1 ? o.dp_size : o.dp_size_local;
  if (local < 1) return InvalidArgumentError("--dp-size-local must be at least 1 (or -1)");
  if (o.dp_rank_start < 0) return InvalidArgumentError("--dp-rank-start must not be negative");
  if (o.dp_rank_start + local > o.dp_size) {
    return InvalidArgumentError("ranks " + std::to_string(o.dp_rank_start) + ".." +
                                std::to_string(o.dp_rank_start + local - 1) + " exceed --dp-size " +
                                std::to_string(o.dp_size));
  }
  if (o.vllm_start_port < 1 || o.vllm_start_port + local - 1 > 65535) {
    return InvalidArgumentError("engine ports " + std::to_string(o.vllm_start_port) + ".." +
                                std::to_string(o.vllm_start_port + local - 1) +
                                " are not all in 1..65535");
  }
  if (o.dp_address.empty()) return InvalidArgumentError("--dp-address is required");
  std::vector<RankLaunch> plan;
  for (int i = 0; i < local; ++i) {
    RankLaunch rank;
    rank.local_index = i;
    rank.dp_rank = o.dp_rank_start + i;
    rank.port = o.vllm_start_port + i;
    for (int device = i * o.tp_size; device < (i + 1) * o.tp_size; ++device) {
      if (!rank.visible_devices.empty()) rank.visible_devices += ",";
      rank.visible_devices += std::to_string(device);
    }
    rank.argv = {"bash",
                 o.template_path,
                 rank.visible_devices,
                 std::to_string(rank.port),
                 std::to_string(o.dp_size),
                 std::to_string(rank.dp_rank),
                 o.dp_address,
                 o.dp_rpc_port,
                 std::to_string(o.tp_size)};
    plan.push_back(std::move(rank));
  }
  return plan;
}

}  // namespace tandem::ops
