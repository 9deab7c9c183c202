#include "ops/process_supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tandem::ops {
namespace {

std::string TempDir() {
  static int n = 0;
  const std::string dir = ::testing::TempDir() + "/supervisor_test_" + std::to_string(getpid()) +
                          "_" + std::to_string(n++);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A shell that appends `tag` to `file` when it gets SIGTERM, then exits 0.
std::vector<std::string> TrapShell(const std::string& tag, const std::string& file) {
  return {"/bin/sh", "-c",
          "trap 'echo " + tag + " >> " + file + "; exit 0' TERM; echo up > " + file + "." + tag +
              "; while :; do sleep 0.05; done"};
}

void WaitForFile(const std::string& path) {
  for (int i = 0; i < 400 && !std::filesystem::exists(path); ++i) usleep(10'000);
}

TEST(ProcessSupervisorTest, ChildOutputGoesToItsLogFileWithExtraEnvironment) {
  const std::string dir = TempDir();
  ProcessSupervisor supervisor;
  ChildOptions options;
  options.log_path = dir + "/child.log";
  options.env = {"TANDEM_TEST_VALUE=hello", "HOME=/nowhere"};
  ASSERT_TRUE(
      supervisor
          .Start("echo", {"/bin/sh", "-c", "echo $TANDEM_TEST_VALUE $HOME; echo err >&2"}, options)
          .ok());
  EXPECT_EQ(supervisor.Wait(), 0);
  EXPECT_EQ(ReadFile(dir + "/child.log"), "hello /nowhere\nerr\n");
  EXPECT_TRUE(supervisor.first_failure().empty());
}

TEST(ProcessSupervisorTest, BadLogPathStartsNothing) {
  ProcessSupervisor supervisor;
  ChildOptions options;
  options.log_path = "/nonexistent/dir/x.log";
  StatusOr<pid_t> pid = supervisor.Start("x", {"/bin/true"}, options);
  EXPECT_EQ(pid.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(supervisor.Wait(), 0);
}

TEST(ProcessSupervisorTest, StopSignalsHigherStagesFirst) {
  const std::string dir = TempDir();
  const std::string order = dir + "/order";
  ProcessSupervisor supervisor;
  ChildOptions low, high;
  low.stop_stage = 0;
  high.stop_stage = 3;
  ASSERT_TRUE(supervisor.Start("store", TrapShell("store", order), low).ok());
  ASSERT_TRUE(supervisor.Start("proxy", TrapShell("proxy", order), high).ok());
  WaitForFile(order + ".store");
  WaitForFile(order + ".proxy");
  EXPECT_TRUE(supervisor.Poll(std::chrono::milliseconds(10)));
  supervisor.Stop(7);
  EXPECT_FALSE(supervisor.Poll(std::chrono::milliseconds(10)));
  EXPECT_EQ(supervisor.Wait(), 7);
  EXPECT_EQ(ReadFile(order), "proxy\nstore\n");
}

TEST(ProcessSupervisorTest, PollReportsAFailedChildAndWaitStopsTheRest) {
  const std::string dir = TempDir();
  const std::string order = dir + "/order";
  ProcessSupervisor supervisor;
  ASSERT_TRUE(supervisor.Start("long", TrapShell("long", order)).ok());
  WaitForFile(order + ".long");
  ASSERT_TRUE(supervisor.Start("dies", {"/bin/sh", "-c", "exit 3"}).ok());
  bool running = true;
  for (int i = 0; i < 100 && running; ++i) running = supervisor.Poll(std::chrono::milliseconds(50));
  EXPECT_FALSE(running);
  EXPECT_EQ(supervisor.first_failure(), "dies");
  EXPECT_EQ(supervisor.Wait(), 3);
  EXPECT_EQ(ReadFile(order), "long\n");
}

// True once `pid` is gone or a zombie.
bool Ended(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return true;
  const char state = line[line.rfind(')') + 2];
  return state == 'Z' || state == 'X';
}

TEST(ProcessSupervisorTest, StopWithSupervisorEndsTheChildWhenTheSupervisorIsKilled) {
  const std::string pid_file = TempDir() + "/child.pid";
  const pid_t supervisor_pid = fork();
  ASSERT_GE(supervisor_pid, 0);
  if (supervisor_pid == 0) {
    ProcessSupervisor supervisor;
    ChildOptions options;
    options.stop_with_supervisor = true;
    auto started = supervisor.Start(
        "sleeper",
        {"/bin/sh", "-c",
         "echo $$ > " + pid_file + ".tmp; mv " + pid_file + ".tmp " + pid_file + "; exec sleep 30"},
        options);
    _exit(started.ok() ? supervisor.Wait() : 1);
  }
  WaitForFile(pid_file);
  const pid_t child = std::stoi(ReadFile(pid_file));
  EXPECT_FALSE(Ended(child));
  kill(supervisor_pid, SIGKILL);
  waitpid(supervisor_pid, nullptr, 0);
  bool ended = false;
  for (int i = 0; i < 500 && !ended; ++i) {
    ended = Ended(child);
    if (!ended) usleep(10'000);
  }
  EXPECT_TRUE(ended);
  waitpid(child, nullptr, WNOHANG);  // reparented to this process when it is a subreaper
  if (!ended) kill(child, SIGKILL);
}

TEST(ProcessSupervisorTest, RestartsAFailingChildWithoutStoppingTheOthers) {
  const std::string dir = TempDir();
  const std::string count = dir + "/starts";
  ProcessSupervisor supervisor;
  std::vector<std::string> failures;
  supervisor.set_on_failure([&](const std::string& name, bool restart) {
    failures.push_back(name + (restart ? " restart" : " fatal"));
  });
  ChildOptions restart;
  restart.restart_on_failure = true;
  restart.restart_delay = std::chrono::milliseconds(50);
  restart.fatal_exit_codes = {2};
  // Fails twice (exit 3), then exits 2: restarted twice, then everything stops.
  ASSERT_TRUE(
      supervisor
          .Start("flaky",
                 {"/bin/sh", "-c",
                  "echo x >> " + count + "; [ $(wc -l < " + count + ") -ge 3 ] && exit 2; exit 3"},
                 restart)
          .ok());
  ASSERT_TRUE(supervisor.Start("steady", TrapShell("steady", dir + "/steady")).ok());
  const int code = supervisor.Wait();
  EXPECT_EQ(code, 2);
  EXPECT_EQ(ReadFile(count), "x\nx\nx\n");
  EXPECT_EQ(failures, (std::vector<std::string>{"flaky restart", "flaky restart", "flaky fatal"}));
  EXPECT_EQ(ReadFile(dir + "/steady"), "steady\n");  // stopped only after the fatal exit
}

}  // namespace
}  // namespace tandem::ops
