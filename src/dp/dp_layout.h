// DpLayout: how `tandem serve` lays out vLLM's data-parallel flags on this node.
//
// Modes (ChooseDpMode):
//   kSingle    today's one-engine server. `--data-parallel-rank r` makes it one rank of a
//              deployment balanced from outside (seed 000: launch_online_dp.py + a proxy);
//              the rank only offsets ports and names the engine.
//   kFrontEnd  no --data-parallel-rank, and --data-parallel-size-local given or
//              --data-parallel-size N > 1: this process supervises M local ranks and serves
//              the OpenAI front end over all N (src/dp/dp_front_end.h).
//   kHeadless  --headless: only the M local ranks, registered with the front end at
//              --data-parallel-address:--data-parallel-rpc-port.
//
// Each local rank is a child process running exactly a kSingle `tandem serve` with the
// user's other flags unchanged, plus
//   --data-parallel-size N --data-parallel-rank r --data-parallel-address A
//   --data-parallel-rpc-port P --host HOST --port PORT+1+r [--threads T]
//   [--cpu-affinity SHARE]
// (r the global rank; PORT and HOST the supervisor's --port and --host; A 127.0.0.1 and
// P 29550, vLLM's default, when not given). The front end owns TCP port P on A for
// rank registration; P+1 is reserved for the expert-parallel rendezvous (DP rank 0's
// engine) and never used here.
//
// Cores: with --cpu-affinity the list is split into M contiguous shares, one per local
// rank (each at least one core); without it no rank is pinned. Threads per rank:
// --threads / M when given, else the share's size, else the cores available / M
// (at least 1), so that the ranks together do not oversubscribe the node.
//
// Thread safety: pure functions and value types.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace tandem::dp {

// vLLM's ParallelConfig.data_parallel_rpc_port default.
inline constexpr int kDefaultRpcPort = 29550;

// The values of the DP-related `tandem serve` flags (-1 / "" / 0: not given).
struct DpFlags {
  int size = 1;         // --data-parallel-size (N)
  int size_local = -1;  // --data-parallel-size-local (M)
  int start_rank = -1;  // --data-parallel-start-rank
  int rank = -1;        // --data-parallel-rank
  bool headless = false;
  std::string address;  // --data-parallel-address
  int rpc_port = 0;     // --data-parallel-rpc-port
  int api_server_count = -1;
  double join_timeout_s = -1;  // --data-parallel-join-timeout (headless; -1: 300 s)
  std::string host = "127.0.0.1";
  int port = 8000;
  int threads = 0;           // --threads (0: default)
  std::vector<int> cpu_ids;  // --cpu-affinity, parsed by the caller (empty: not given)
};

enum class DpMode { kSingle, kFrontEnd, kHeadless };

DpMode ChooseDpMode(const DpFlags& flags);

// One local rank.
struct RankSlot {
  int rank = 0;           // global DP rank
  int local_index = 0;    // 0..M-1
  int port = 0;           // its HTTP port (PORT + 1 + rank)
  std::vector<int> cpus;  // its share of --cpu-affinity (empty: not pinned)
  int threads = 1;
};

struct DpPlan {
  DpMode mode = DpMode::kSingle;
  int size = 1;         // N
  std::string address;  // A (default 127.0.0.1)
  int rpc_port = kDefaultRpcPort;
  std::vector<RankSlot> ranks;  // the M local ranks, in rank order
};

// The plan for kFrontEnd / kHeadless (kSingle: a plan without ranks, after checking that
// --data-parallel-rank is in [0, N), that --data-parallel-size-local / -start-rank, if
// given, say just that rank, and --api-server-count <= 1). InvalidArgument
// naming the flag for inconsistent flags: size_local > size, start rank out of [0, N)
// or start + local > N, --headless without --data-parallel-address or with 0 local
// ranks, --data-parallel-rank together with --headless,
// --data-parallel-join-timeout without --headless, rank ports beyond 65535, an rpc port
// (or rpc port + 1) beyond 65535, fewer
// --cpu-affinity cores than local ranks, api-server-count outside [1, 64].
// `available_cores`: the cores this process may run on (for the default thread split).
StatusOr<DpPlan> PlanDp(const DpFlags& flags, int available_cores);

// `args` (the `tandem serve` arguments after "serve") without the flags the supervisor
// sets per rank or keeps for itself: the --data-parallel-* flags, --headless,
// --api-server-count, --host, --port, -t/--threads and --cpu-affinity, in both
// "--flag value" and "--flag=value" forms (and "-tN").
std::vector<std::string> StripSupervisorFlags(const std::vector<std::string>& args);

// The command line of one local rank: `exe serve`, `user_args` (already stripped), then
// the rank's own flags (see above).
std::vector<std::string> RankArgv(const std::string& exe, const std::vector<std::string>& user_args,
                                  const DpPlan& plan, const RankSlot& slot,
                                  const std::string& host);

}  // namespace tandem::dp
