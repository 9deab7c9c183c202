#include "dp/dp_layout.h"

#include <gtest/gtest.h>

namespace tandem::dp {
namespace {

using Argv = std::vector<std::string>;

// The seeds' node 0: --data-parallel-size 4 --data-parallel-size-local 2
// --data-parallel-start-rank 0 --data-parallel-address 10.0.0.1 --data-parallel-rpc-port 12980
DpFlags SeedNode0() {
  DpFlags f;
  f.size = 4;
  f.size_local = 2;
  f.start_rank = 0;
  f.address = "10.0.0.1";
  f.rpc_port = 12980;
  f.api_server_count = 1;
  f.port = 8000;
  return f;
}

TEST(DpLayout, ChoosesTheMode) {
  DpFlags f;
  EXPECT_EQ(ChooseDpMode(f), DpMode::kSingle);
  f.size = 4;
  f.rank = 2;  // seed 000: one rank of an externally balanced deployment
  EXPECT_EQ(ChooseDpMode(f), DpMode::kSingle);
  f.size_local = 1;  // ... even with a one-rank local layout
  EXPECT_EQ(ChooseDpMode(f), DpMode::kSingle);
  f.size_local = -1;
  f.rank = -1;
  EXPECT_EQ(ChooseDpMode(f), DpMode::kFrontEnd);
  f.size = 1;
  f.size_local = 1;
  EXPECT_EQ(ChooseDpMode(f), DpMode::kFrontEnd);
  f.headless = true;
  EXPECT_EQ(ChooseDpMode(f), DpMode::kHeadless);
}

TEST(DpLayout, AcceptsOneRankWithItsOwnLocalLayout) {
  DpFlags f;
  f.size = 4;
  f.rank = 2;
  f.size_local = 1;
  f.start_rank = 2;
  f.api_server_count = 1;
  auto plan = PlanDp(f, 8);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->mode, DpMode::kSingle);
  EXPECT_TRUE(plan->ranks.empty());
}

TEST(DpLayout, PlansTheSeedsNodes) {
  auto plan = PlanDp(SeedNode0(), 16);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->mode, DpMode::kFrontEnd);
  ASSERT_EQ(plan->ranks.size(), 2u);
  EXPECT_EQ(plan->ranks[0].rank, 0);
  EXPECT_EQ(plan->ranks[1].rank, 1);
  EXPECT_EQ(plan->ranks[1].port, 8002);  // --port + 1 + rank
  EXPECT_EQ(plan->ranks[0].threads, 8);  // 16 cores / 2 local ranks
  EXPECT_TRUE(plan->ranks[0].cpus.empty());
  EXPECT_EQ(plan->rpc_port, 12980);

  DpFlags node1 = SeedNode0();
  node1.headless = true;
  node1.start_rank = 2;
  node1.api_server_count = -1;
  plan = PlanDp(node1, 16);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->mode, DpMode::kHeadless);
  EXPECT_EQ(plan->ranks[0].rank, 2);
  EXPECT_EQ(plan->ranks[1].port, 8004);
}

TEST(DpLayout, DefaultsTheAddressAndVllmsRpcPort) {
  DpFlags f;
  f.size = 2;
  auto plan = PlanDp(f, 2);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->address, "127.0.0.1");
  EXPECT_EQ(plan->rpc_port, 29550);
  ASSERT_EQ(plan->ranks.size(), 2u);  // size_local defaults to size
  EXPECT_EQ(plan->ranks[1].threads, 1);
}

TEST(DpLayout, SplitsCpuAffinityAndThreads) {
  DpFlags f;
  f.size = 3;
  f.cpu_ids = {0, 1, 2, 3, 4, 5, 6};
  auto plan = PlanDp(f, 64);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->ranks[0].cpus, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(plan->ranks[1].cpus, (std::vector<int>{3, 4}));
  EXPECT_EQ(plan->ranks[2].cpus, (std::vector<int>{5, 6}));
  EXPECT_EQ(plan->ranks[0].threads, 3);
  EXPECT_EQ(plan->ranks[2].threads, 2);
  f.threads = 6;
  plan = PlanDp(f, 64);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->ranks[0].threads, 2);
}

TEST(DpLayout, RefusesBadFlagsNamingThem) {
  auto message = [](const DpFlags& f) {
    auto plan = PlanDp(f, 8);
    EXPECT_FALSE(plan.ok());
    return plan.ok() ? std::string() : std::string(plan.status().message());
  };
  DpFlags f = SeedNode0();
  f.size_local = 5;
  EXPECT_NE(message(f).find("--data-parallel-size-local"), std::string::npos);
  f = SeedNode0();
  f.start_rank = 4;
  EXPECT_NE(message(f).find("--data-parallel-start-rank"), std::string::npos);
  f.start_rank = 3;  // 3 + 2 local > 4
  EXPECT_NE(message(f).find("--data-parallel-start-rank"), std::string::npos);
  f = SeedNode0();
  f.headless = true;
  f.api_server_count = -1;
  f.address.clear();
  EXPECT_NE(message(f).find("--data-parallel-address"), std::string::npos);
  f = SeedNode0();
  f.rank = 1;  // one rank (kSingle) with a two-rank local layout
  EXPECT_NE(message(f).find("--data-parallel-size-local"), std::string::npos);
  f.size_local = 1;
  f.start_rank = 0;
  EXPECT_NE(message(f).find("--data-parallel-start-rank"), std::string::npos);
  f.rank = 4;
  f.start_rank = -1;
  EXPECT_NE(message(f).find("--data-parallel-rank"), std::string::npos);
  f = SeedNode0();
  f.headless = true;
  f.api_server_count = -1;
  f.rank = 2;
  EXPECT_NE(message(f).find("--data-parallel-rank"), std::string::npos);
  f = SeedNode0();
  f.join_timeout_s = 10;  // only for --headless
  EXPECT_NE(message(f).find("--data-parallel-join-timeout"), std::string::npos);
  f = SeedNode0();
  f.cpu_ids = {0};
  EXPECT_NE(message(f).find("--cpu-affinity"), std::string::npos);
  f = SeedNode0();
  f.api_server_count = 0;
  EXPECT_NE(message(f).find("--api-server-count"), std::string::npos);
  f = SeedNode0();
  f.port = 65534;
  EXPECT_NE(message(f).find("--port"), std::string::npos);
  f.port = 0;
  EXPECT_NE(message(f).find("--port 0"), std::string::npos);
  f = SeedNode0();
  f.rpc_port = 65535;  // rpc_port + 1 is reserved
  EXPECT_NE(message(f).find("--data-parallel-rpc-port"), std::string::npos);
}

TEST(DpLayout, StripsTheSupervisorsFlagsOnly) {
  const Argv args{"m.gguf",
                  "--data-parallel-size",
                  "4",
                  "--data-parallel-size-local=2",
                  "--headless",
                  "--enable-expert-parallel",
                  "--port",
                  "9000",
                  "-t4",
                  "--threads",
                  "3",
                  "--host=0.0.0.0",
                  "--speculative-config",
                  "{\"a\":1}",
                  "--cpu-affinity",
                  "0-3",
                  "--api-server-count",
                  "1",
                  "--max-num-seqs",
                  "8"};
  EXPECT_EQ(StripSupervisorFlags(args),
            (Argv{"m.gguf", "--enable-expert-parallel", "--speculative-config", "{\"a\":1}",
                  "--max-num-seqs", "8"}));
}

TEST(DpLayout, RankArgvIsASingleRankServe) {
  DpFlags f = SeedNode0();
  f.cpu_ids = {4, 5, 6, 7};
  auto plan = PlanDp(f, 8);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(RankArgv("/bin/tandem", {"m.gguf", "--enable-expert-parallel"}, *plan, plan->ranks[1],
                     "127.0.0.1"),
            (Argv{"/bin/tandem",
                  "serve",
                  "m.gguf",
                  "--enable-expert-parallel",
                  "--data-parallel-size",
                  "4",
                  "--data-parallel-rank",
                  "1",
                  "--data-parallel-address",
                  "10.0.0.1",
                  "--data-parallel-rpc-port",
                  "12980",
                  "--host",
                  "127.0.0.1",
                  "--port",
                  "8002",
                  "--threads",
                  "2",
                  "--cpu-affinity",
                  "6,7"}));
}

}  // namespace
}  // namespace tandem::dp
