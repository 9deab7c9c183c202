#include "cluster/cluster_state.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

namespace tandem::cluster {
namespace {

ClusterState SampleState() {
  ClusterState state;
  state.cluster = "local";
  state.node = "n0";
  state.status = "ready";
  state.supervisor = {123, 456};
  state.logs_dir = "/tmp/logs";
  state.proxy_url = "http://127.0.0.1:8000";
  state.services.push_back(
      {"etcd", "etcd", {200, 7}, {{"client", 2379}, {"peer", 2380}}, "/tmp/logs/etcd.log"});
  state.services.push_back({"proxy", "proxy", {201, 8}, {{"http", 8000}}, "/tmp/logs/proxy.log"});
  return state;
}

TEST(ClusterStateTest, RoundTripsThroughJson) {
  const ClusterState state = SampleState();
  StatusOr<ClusterState> back = ParseClusterState(ClusterStateToJson(state));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->cluster, "local");
  EXPECT_EQ(back->node, "n0");
  EXPECT_EQ(back->status, "ready");
  EXPECT_EQ(back->supervisor.pid, 123);
  EXPECT_EQ(back->supervisor.start_ticks, 456u);
  EXPECT_EQ(back->proxy_url, "http://127.0.0.1:8000");
  ASSERT_EQ(back->services.size(), 2u);
  EXPECT_EQ(back->services[0].name, "etcd");
  EXPECT_EQ(back->services[0].process.pid, 200);
  EXPECT_EQ(back->services[0].ports.at("peer"), 2380);
  EXPECT_EQ(back->services[1].log_path, "/tmp/logs/proxy.log");
}

TEST(ClusterStateTest, RejectsOtherFiles) {
  EXPECT_EQ(ParseClusterState("[]").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseClusterState("{\"cluster\": \"x\"}").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ClusterStateTest, WriteAndReadFile) {
  const std::string dir = ::testing::TempDir() + "/cluster_state_test_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/state.json";
  EXPECT_EQ(ReadClusterState(path).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteClusterState(path, SampleState()).ok());
  StatusOr<ClusterState> back = ReadClusterState(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->services.size(), 2u);
  std::filesystem::remove_all(dir);
}

TEST(ProcessIdentityTest, KnowsItselfAndNotARecycledPid) {
  const ProcessIdentity self = SelfIdentity();
  EXPECT_EQ(self.pid, getpid());
  EXPECT_GT(self.start_ticks, 0u);
  EXPECT_TRUE(IsRunning(self));
  ProcessIdentity other_start = self;
  other_start.start_ticks += 1;  // same pid, another process
  EXPECT_FALSE(IsRunning(other_start));
  EXPECT_EQ(IdentifyProcess(-1).status().code(), StatusCode::kNotFound);
}

TEST(ProcessIdentityTest, AZombieIsNotRunning) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(0);
  StatusOr<ProcessIdentity> child = IdentifyProcess(pid);
  ASSERT_TRUE(child.ok());
  // Exited but not reaped yet: a zombie.
  for (int i = 0; i < 200 && IsRunning(*child); ++i) usleep(10'000);
  EXPECT_FALSE(IsRunning(*child));
  waitpid(pid, nullptr, 0);
  EXPECT_FALSE(IsRunning(*child));
}

}  // namespace
}  // namespace tandem::cluster
