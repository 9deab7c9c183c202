#include "ops/launch_plan.h"

#include <gtest/gtest.h>

#include <chrono>

#include "ops/process_supervisor.h"

namespace tandem::ops {
namespace {

using Argv = std::vector<std::string>;

TEST(LaunchPlan, MatchesTheSeedScriptForTwoRanksPerNode) {
  // python launch_online_dp.py --dp-size 8 --tp-size 4 --dp-size-local 2 --dp-rank-start 4
  //   --dp-address 10.0.0.1 --dp-rpc-port 10521 --vllm-start-port 6600
  LaunchOptions o;
  o.dp_size = 8;
  o.tp_size = 4;
  o.dp_size_local = 2;
  o.dp_rank_start = 4;
  o.dp_address = "10.0.0.1";
  o.dp_rpc_port = "10521";
  o.vllm_start_port = 6600;
  auto plan = PlanLaunch(o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].argv, (Argv{"bash", "./run_dp_template.sh", "0,1,2,3", "6600", "8", "4",
                                   "10.0.0.1", "10521", "4"}));
  EXPECT_EQ((*plan)[1].argv, (Argv{"bash", "./run_dp_template.sh", "4,5,6,7", "6601", "8", "5",
                                   "10.0.0.1", "10521", "4"}));
  EXPECT_EQ((*plan)[1].dp_rank, 5);
  EXPECT_EQ((*plan)[1].port, 6601);
}

TEST(LaunchPlan, DefaultsAsInTheSeed) {
  LaunchOptions o;
  o.dp_size = 3;
  o.dp_address = "h";
  auto plan = PlanLaunch(o);  // dp-size-local -1 = all ranks; tp 1; port 9000; rpc 12345
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 3u);
  EXPECT_EQ((*plan)[2].argv,
            (Argv{"bash", "./run_dp_template.sh", "2", "9002", "3", "2", "h", "12345", "1"}));
}

TEST(LaunchPlan, RejectsInconsistentOptions) {
  auto bad = [](auto mutate) {
    LaunchOptions o;
    o.dp_size = 4;
    o.dp_size_local = 2;
    o.dp_address = "h";
    mutate(o);
    return PlanLaunch(o).status().code();
  };
  EXPECT_EQ(bad([](LaunchOptions& o) { o.dp_size = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](LaunchOptions& o) { o.tp_size = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](LaunchOptions& o) { o.dp_rank_start = 3; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](LaunchOptions& o) { o.dp_size_local = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](LaunchOptions& o) { o.vllm_start_port = 65535; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](LaunchOptions& o) { o.dp_address.clear(); }), StatusCode::kInvalidArgument);
}

TEST(ProcessSupervisor, AFailingChildStopsTheOthersAndGivesItsExitCode) {
  ProcessSupervisor supervisor(SupervisorOptions{std::chrono::milliseconds(5000)});
  ASSERT_TRUE(supervisor.Start("sleeper", {"sleep", "30"}).ok());
  // A shell whose own child outlives it: the group signal and the subreaper get both.
  ASSERT_TRUE(supervisor.Start("orphaner", {"sh", "-c", "sleep 30 & exit 0"}).ok());
  ASSERT_TRUE(supervisor.Start("failer", {"sh", "-c", "sleep 0.2; exit 3"}).ok());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(supervisor.Wait(), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

TEST(ProcessSupervisor, AllCleanExitsGiveZeroAndExecFailureGives127) {
  {
    ProcessSupervisor supervisor;
    ASSERT_TRUE(supervisor.Start("a", {"true"}).ok());
    ASSERT_TRUE(supervisor.Start("b", {"sh", "-c", "exit 0"}).ok());
    EXPECT_EQ(supervisor.Wait(), 0);
  }
  ProcessSupervisor supervisor;
  ASSERT_TRUE(supervisor.Start("missing", {"/nonexistent/program"}).ok());
  EXPECT_EQ(supervisor.Wait(), 127);
}

}  // namespace
}  // namespace tandem::ops
