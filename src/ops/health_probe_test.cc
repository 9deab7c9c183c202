#include "ops/health_probe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tandem::ops {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class LivenessFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("tandem_liveness_" + std::to_string(getpid()))).string();
  }
  void TearDown() override { fs::remove(path_); }
  void Write(const std::string& content) { std::ofstream(path_) << content; }
  std::string path_;
};

TEST_F(LivenessFileTest, FreshFileWithTheSuccessLineIsAlive) {
  Write("liveness check success\n");
  const auto now = fs::file_time_type::clock::now();
  EXPECT_TRUE(CheckLivenessFile(path_, 30s, now).ok());
}

TEST_F(LivenessFileTest, MissingWrongOrStaleFileIsNotAlive) {
  const auto now = fs::file_time_type::clock::now();
  Status missing = CheckLivenessFile(path_, 30s, now);
  EXPECT_EQ(missing.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.message().find("not exists"), std::string::npos);

  Write("liveness check failed: etcd unreachable\n");
  Status wrong = CheckLivenessFile(path_, 30s, now);
  EXPECT_EQ(wrong.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(wrong.message().find("etcd unreachable"), std::string::npos);

  Write("liveness check success\n");
  fs::last_write_time(path_, now - 31s);
  Status stale = CheckLivenessFile(path_, 30s, now);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.message().find("not update"), std::string::npos);
  EXPECT_TRUE(CheckLivenessFile(path_, 60s, now).ok());
}

TEST_F(LivenessFileTest, SlaveLivenessChecksOnlyTheFile) {
  LivenessProbeOptions o;
  o.master = false;
  o.liveness_file = path_;
  o.readiness.log_file = path_ + ".log";
  o.etcd_address = "127.0.0.1:1";  // never contacted on a slave
  Write("liveness check success\n");
  std::ostringstream out;
  EXPECT_EQ(RunLivenessProbe(o, out), 0);
  EXPECT_NE(out.str().find("pool liveness check success"), std::string::npos);
  fs::remove(path_);
  EXPECT_EQ(RunLivenessProbe(o, out), 1);
  std::ifstream log(o.readiness.log_file);
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find("[ERROR] [tandem probe] liveness probe"), std::string::npos)
      << text.str();
  fs::remove(o.readiness.log_file);
}

}  // namespace
}  // namespace tandem::ops
