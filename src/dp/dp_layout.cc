#include "dp/dp_layout.h"

#include <algorithm>
#include <string_view>

namespace tandem::dp {
namespace {

std::string JoinCpus(const std::vector<int>& cpus) {
  std::string out;
  for (int c : cpus) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

// Supervisor flags that take a value, and those that do not.
constexpr std::string_view kValueFlags[] = {"--data-parallel-size",
                                            "--data-parallel-size-local",
                                            "--data-parallel-start-rank",
                                            "--data-parallel-rank",
                                            "--data-parallel-address",
                                            "--data-parallel-rpc-port",
                                            "--data-parallel-join-timeout",
                                            "--api-server-count",
                                            "--host",
                                            "--port",
                                            "--threads",
                                            "-t",
                                            "--cpu-affinity"};
constexpr std::string_view kBareFlags[] = {"--headless"};

}  // namespace

DpMode ChooseDpMode(const DpFlags& f) {
  if (f.headless) return DpMode::kHeadless;
  if (f.rank >= 0) return DpMode::kSingle;  // one rank, balanced from outside
  if (f.size_local >= 0 || f.size > 1) return DpMode::kFrontEnd;
  return DpMode::kSingle;
}

StatusOr<DpPlan> PlanDp(const DpFlags& f, int available_cores) {
  DpPlan plan;
  plan.mode = ChooseDpMode(f);
  plan.size = f.size;
  if (f.size < 1) return InvalidArgumentError("--data-parallel-size must be at least 1");
  if (plan.mode == DpMode::kSingle) {
    // One rank of an externally balanced deployment: the local layout, if given, must
    // say exactly that rank.
    if (f.rank >= 0 && f.rank >= f.size) {
      return InvalidArgumentError("--data-parallel-rank (" + std::to_string(f.rank) +
                                  ") is out of range [0, " + std::to_string(f.size) + ")");
    }
    if (f.size_local > 1) {
      return InvalidArgumentError(
          "--data-parallel-size-local > 1 cannot be combined with --data-parallel-rank (one "
          "rank); use --data-parallel-start-rank");
    }
    if (f.start_rank >= 0 && f.start_rank != std::max(0, f.rank)) {
      return InvalidArgumentError("--data-parallel-start-rank must equal --data-parallel-rank");
    }
    if (f.join_timeout_s >= 0) {
      return InvalidArgumentError("--data-parallel-join-timeout only applies to --headless nodes");
    }
    if (f.api_server_count > 1) {
      return InvalidArgumentError(
          "--api-server-count > 1 needs the data-parallel front end (--data-parallel-size N > 1 "
          "without --data-parallel-rank, or --data-parallel-size-local); one engine serves its "
          "port with its own threads");
    }
    return plan;
  }
  if (f.headless && f.rank >= 0) {
    return InvalidArgumentError(
        "--data-parallel-rank cannot be combined with --headless (use --data-parallel-start-rank)");
  }
  const int local = f.size_local >= 0 ? f.size_local : f.size;  // vLLM's default
  if (local > f.size) {
    return InvalidArgumentError("--data-parallel-size-local (" + std::to_string(local) +
                                ") is larger than --data-parallel-size (" + std::to_string(f.size) +
                                ")");
  }
  const int start = f.start_rank >= 0 ? f.start_rank : 0;
  if (start >= f.size) {
    return InvalidArgumentError("--data-parallel-start-rank (" + std::to_string(start) +
                                ") is out of range [0, " + std::to_string(f.size) + ")");
  }
  if (start + local > f.size) {
    return InvalidArgumentError(
        "--data-parallel-start-rank " + std::to_string(start) + " + " + std::to_string(local) +
        " local ranks go beyond --data-parallel-size " + std::to_string(f.size));
  }
  if (f.headless) {
    if (f.address.empty()) {
      return InvalidArgumentError(
          "--headless needs --data-parallel-address (the front end node's address)");
    }
    if (local < 1) return InvalidArgumentError("--headless needs --data-parallel-size-local >= 1");
    if (f.api_server_count >= 0) {
      return InvalidArgumentError("--api-server-count: a --headless node runs no API server");
    }
    if (f.join_timeout_s >= 0 && !(f.join_timeout_s > 0)) {
      return InvalidArgumentError("--data-parallel-join-timeout must be positive");
    }
  } else if (f.join_timeout_s >= 0) {
    return InvalidArgumentError("--data-parallel-join-timeout only applies to --headless nodes");
  }
  const int api_servers = f.api_server_count >= 0 ? f.api_server_count : 1;
  if (!f.headless && (api_servers < 1 || api_servers > 64)) {
    return InvalidArgumentError("--api-server-count must be in [1, 64]");
  }
  plan.address = f.address.empty() ? "127.0.0.1" : f.address;
  plan.rpc_port = f.rpc_port > 0 ? f.rpc_port : kDefaultRpcPort;
  if (plan.rpc_port + 1 > 65535) {
    return InvalidArgumentError("--data-parallel-rpc-port must leave port + 1 (reserved) <= 65535");
  }
  if (f.port < 1) {
    return InvalidArgumentError(
        "--port 0 (any free port) cannot be used with data parallelism: the ranks listen on "
        "--port + 1 + rank");
  }
  if (f.port + 1 + start + local - 1 > 65535) {
    return InvalidArgumentError("--port: the ranks' ports (--port + 1 + rank) go beyond 65535");
  }
  if (!f.cpu_ids.empty() && static_cast<int>(f.cpu_ids.size()) < local) {
    return InvalidArgumentError("--cpu-affinity lists " + std::to_string(f.cpu_ids.size()) +
                                " cores for " + std::to_string(local) +
                                " local data-parallel ranks; want at least one each");
  }
  if (f.threads > 0 && f.threads < local) {
    return InvalidArgumentError("--threads " + std::to_string(f.threads) + " is fewer than the " +
                                std::to_string(local) + " local data-parallel ranks");
  }
  for (int i = 0; i < local; ++i) {
    RankSlot slot;
    slot.rank = start + i;
    slot.local_index = i;
    slot.port = f.port + 1 + slot.rank;
    if (!f.cpu_ids.empty()) {
      // Contiguous shares; the first (size % local) ranks get one core more.
      const size_t n = f.cpu_ids.size(), base = n / local, extra = n % local;
      const size_t begin = i * base + std::min<size_t>(i, extra);
      const size_t count = base + (static_cast<size_t>(i) < extra ? 1 : 0);
      slot.cpus.assign(f.cpu_ids.begin() + begin, f.cpu_ids.begin() + begin + count);
    }
    if (f.threads > 0) {
      slot.threads = f.threads / local;
    } else if (!slot.cpus.empty()) {
      slot.threads = static_cast<int>(slot.cpus.size());
    } else {
      slot.threads = std::max(1, available_cores / std::max(1, local));
    }
    plan.ranks.push_back(std::move(slot));
  }
  return plan;
}

std::vector<std::string> StripSupervisorFlags(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    bool drop = false;
    for (std::string_view flag : kBareFlags) drop = drop || a == flag;
    for (std::string_view flag : kValueFlags) {
      if (a == flag) {
        drop = true;
        ++i;  // and its value
        break;
      }
      if (a.size() > flag.size() && a.starts_with(flag) &&
          (a[flag.size()] == '=' || flag == "-t")) {
        drop = true;  // "--flag=value", "-t4"
        break;
      }
    }
    if (!drop) out.push_back(args[i]);
  }
  return out;
}

std::vector<std::string> RankArgv(const std::string& exe, const std::vector<std::string>& user_args,
                                  const DpPlan& plan, const RankSlot& slot,
                                  const std::string& host) {
  std::vector<std::string> argv{exe, "serve"};
  argv.insert(argv.end(), user_args.begin(), user_args.end());
  for (const std::string& s :
       {std::string("--data-parallel-size"), std::to_string(plan.size),
        std::string("--data-parallel-rank"), std::to_string(slot.rank),
        std::string("--data-parallel-address"), plan.address,
        std::string("--data-parallel-rpc-port"), std::to_string(plan.rpc_port),
        std::string("--host"), host, std::string("--port"), std::to_string(slot.port),
        std::string("--threads"), std::to_string(slot.threads)}) {
    argv.push_back(s);
  }
  if (!slot.cpus.empty()) {
    argv.push_back("--cpu-affinity");
    argv.push_back(JoinCpus(slot.cpus));
  }
  return argv;
}

}  // namespace tandem::dp
