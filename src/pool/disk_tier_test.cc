#include "pool/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace tandem::pool {
namespace {

class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/disk_tier_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<DiskTier> OpenTier(uint64_t limit = 1 << 20) {
    DiskTierOptions o;
    o.directory = dir_;
    o.size_limit_bytes = limit;
    o.on_dropped = [this](const std::vector<std::string>& keys) {
      std::lock_guard<std::mutex> lock(mu_);
      dropped_.insert(dropped_.end(), keys.begin(), keys.end());
    };
    auto tier = DiskTier::Open(o);
    EXPECT_TRUE(tier.ok()) << tier.status().ToString();
    return tier.ok() ? std::move(tier).value() : nullptr;
  }
  static std::string Value(char c, size_t n) { return std::string(n, c); }
  static bool Spill(DiskTier& t, const std::string& key, const std::string& value) {
    return t.Spill(key, reinterpret_cast<const uint8_t*>(value.data()), value.size());
  }
  static StatusOr<std::string> Read(DiskTier& t, const std::string& key, size_t n) {
    std::string out(n, '\0');
    Status s = t.Read(key, reinterpret_cast<uint8_t*>(out.data()), n);
    if (!s.ok()) return s;
    return out;
  }
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) names.push_back(e.path());
    return names;
  }

  std::string dir_;
  std::mutex mu_;
  std::vector<std::string> dropped_;
};

TEST_F(DiskTierTest, SpillThenReadBack) {
  auto t = OpenTier();
  ASSERT_TRUE(Spill(*t, "a", Value('a', 1000)));
  ASSERT_TRUE(Spill(*t, "b", Value('b', 2000)));
  EXPECT_TRUE(t->Contains("a"));  // queued or written: readable either way
  auto a = Read(*t, "a", 1000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, Value('a', 1000));
  t->Flush();
  EXPECT_EQ(Files().size(), 2u);
  auto st = t->stats();
  EXPECT_EQ(st.objects, 2u);
  EXPECT_EQ(st.bytes, 3000u);
  EXPECT_EQ(st.spills, 2u);
  EXPECT_EQ(st.bytes_written, 3000u);
  const uint64_t read_before = st.bytes_read;  // "a" may have been read from the queue
  auto b = Read(*t, "b", 2000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, Value('b', 2000));
  EXPECT_EQ(t->stats().bytes_read, read_before + 2000);
  EXPECT_EQ(Read(*t, "c", 10).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Read(*t, "b", 10).status().code(), StatusCode::kInvalidArgument);
  // Spilling a key already on disk writes nothing.
  EXPECT_TRUE(Spill(*t, "a", Value('a', 1000)));
  t->Flush();
  EXPECT_EQ(t->stats().spills, 2u);
}

TEST_F(DiskTierTest, RestartReindexesTheDirectory) {
  {
    auto t = OpenTier();
    for (int i = 0; i < 5; ++i) Spill(*t, "key" + std::to_string(i), Value('0' + i, 100 + i));
    // Destroyed without Flush: a graceful stop writes what is queued.
  }
  const std::string leftover = dir_ + "/0123456789abcdef.kv.tmp";  // a write cut short
  const std::string foreign = dir_ + "/notes.tmp";                 // not the tier's
  close(open(leftover.c_str(), O_CREAT | O_WRONLY, 0600));
  close(open(foreign.c_str(), O_CREAT | O_WRONLY, 0600));
  auto t = OpenTier();
  EXPECT_FALSE(std::filesystem::exists(leftover));
  EXPECT_TRUE(std::filesystem::exists(foreign));
  auto st = t->stats();
  EXPECT_EQ(st.indexed_at_start, 5u);
  EXPECT_EQ(st.objects, 5u);
  EXPECT_EQ(t->Keys().size(), 5u);
  for (int i = 0; i < 5; ++i) {
    auto v = Read(*t, "key" + std::to_string(i), 100 + i);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(*v, Value('0' + i, 100 + i));
  }
}

TEST_F(DiskTierTest, CorruptOrTruncatedFilesAreNeverServed) {
  {
    auto t = OpenTier();
    Spill(*t, "flipped", Value('f', 4096));
    Spill(*t, "truncated", Value('t', 4096));
    Spill(*t, "good", Value('g', 4096));
  }
  std::string flipped_path, truncated_path;
  for (const auto& path : Files()) {
    std::string content(1 << 13, '\0');
    int fd = open(path.c_str(), O_RDONLY);
    ssize_t n = read(fd, content.data(), content.size());
    close(fd);
    ASSERT_GT(n, 0);
    if (content.find("flipped") != std::string::npos) flipped_path = path;
    if (content.find("truncated") != std::string::npos) truncated_path = path;
  }
  ASSERT_FALSE(flipped_path.empty());
  ASSERT_FALSE(truncated_path.empty());
  {  // one bit of the value, past the header and key
    int fd = open(flipped_path.c_str(), O_RDWR);
    char c = 0;
    ASSERT_EQ(pread(fd, &c, 1, 2000), 1);
    c ^= 1;
    ASSERT_EQ(pwrite(fd, &c, 1, 2000), 1);
    close(fd);
  }
  ASSERT_EQ(truncate(truncated_path.c_str(), 1000), 0);

  auto t = OpenTier();
  EXPECT_EQ(t->stats().corrupt, 1u);  // the truncated file, at the scan
  EXPECT_FALSE(t->Contains("truncated"));
  EXPECT_TRUE(t->Contains("flipped"));  // its header is fine: caught on read
  EXPECT_EQ(Read(*t, "flipped", 4096).status().code(), StatusCode::kDataLoss);
  EXPECT_FALSE(t->Contains("flipped"));
  EXPECT_EQ(t->stats().corrupt, 2u);
  EXPECT_EQ(Read(*t, "flipped", 4096).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Read(*t, "good", 4096).ok());
  EXPECT_EQ(Files().size(), 1u);  // bad files are deleted
}

TEST_F(DiskTierTest, SizeLimitEvictsLeastRecentlyUsedAndDropsTooBig) {
  // 10 KiB: high watermark 9.5 KiB, low 9 KiB; objects of 1 KiB.
  auto t = OpenTier(10 * 1024);
  for (int i = 0; i < 9; ++i) {
    Spill(*t, "k" + std::to_string(i), Value('x', 1024));
    t->Flush();
  }
  ASSERT_TRUE(Read(*t, "k0", 1024).ok());  // k0 becomes most recent
  Spill(*t, "k9", Value('x', 1024));
  t->Flush();
  auto st = t->stats();
  EXPECT_LE(st.bytes, 9u * 1024);
  EXPECT_GE(st.evictions, 1u);
  EXPECT_TRUE(t->Contains("k0"));
  EXPECT_FALSE(t->Contains("k1"));
  EXPECT_TRUE(t->Contains("k9"));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSERT_FALSE(dropped_.empty());
    EXPECT_EQ(dropped_.front(), "k1");
  }
  EXPECT_FALSE(Spill(*t, "huge", Value('h', 20 * 1024)));
  EXPECT_EQ(t->stats().spill_drops, 1u);
  EXPECT_EQ(Files().size(), st.objects);
}

TEST_F(DiskTierTest, ReadsDuringEvictionAreNeverTorn) {
  // 64 KiB limit, 8 KiB objects: the writer evicts continuously while readers read.
  auto t = OpenTier(64 * 1024);
  constexpr int kKeys = 40;
  auto value = [](int i) { return std::string(8192, static_cast<char>('A' + i % 26)); };
  std::atomic<bool> stop{false};
  std::atomic<int> good{0}, bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&, r] {
      std::string out(8192, '\0');
      for (int n = 0; !stop; ++n) {
        int i = (n * 7 + r) % kKeys;
        Status s = t->Read("k" + std::to_string(i), reinterpret_cast<uint8_t*>(out.data()), 8192);
        if (s.ok()) {
          (out == value(i) ? good : bad)++;
        } else if (s.code() != StatusCode::kNotFound) {
          bad++;  // a DataLoss would mean a file was torn under a reader
        }
      }
    });
  }
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < kKeys; ++i) Spill(*t, "k" + std::to_string(i), value(i));
  }
  t->Flush();
  stop = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(good.load(), 0);
  EXPECT_EQ(t->stats().corrupt, 0u);
  EXPECT_LE(t->stats().bytes, 64u * 1024);
}

TEST_F(DiskTierTest, UnwritableDirectoryDropsSpillsWithoutFailing) {
  auto t = OpenTier();
  ASSERT_EQ(chmod(dir_.c_str(), 0500), 0);
  Spill(*t, "a", Value('a', 100));
  t->Flush();
  if (geteuid() != 0) {  // root writes anyway
    EXPECT_EQ(t->stats().spill_drops, 1u);
    EXPECT_FALSE(t->Contains("a"));
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(dropped_, std::vector<std::string>{"a"});
  }
  chmod(dir_.c_str(), 0700);
}

TEST_F(DiskTierTest, CheckSpillDirectoryNamesTheProblem) {
  EXPECT_TRUE(CheckSpillDirectory(dir_).ok());
  EXPECT_FALSE(CheckSpillDirectory(dir_ + "/absent").ok());
  std::string file = dir_ + "/file";
  close(open(file.c_str(), O_CREAT | O_WRONLY, 0600));
  Status s = CheckSpillDirectory(file);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a directory"), std::string::npos);
}

}  // namespace
}  // namespace tandem::pool
