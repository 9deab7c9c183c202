#include "kv/block_hash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

namespace tandem::kv {
namespace {

std::vector<int32_t> Iota(int32_t n, int32_t start = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

// Pins scheme v1. If this fails, the scheme changed: every cache key in every pool changes
// with it. Bump kSchemeTag and these values together, on purpose. Values cross-checked with
// an independent Python serializer calling libxxhash's XXH3_128bits through ctypes.
TEST(BlockHashTest, GoldenValues) {
  const BlockHash root = ComputeRootHash("tandem-golden-model", 4, "f16");
  EXPECT_EQ(root.ToHex(), "854b5d59d41f2b82e1b6c636a1cab280");
  // Tokens 0..9 with block size 4: two full blocks, the partial tail (8, 9) is ignored.
  // The -7 checks negative ids serialize as two's complement little-endian.
  std::vector<int32_t> tokens = Iota(10);
  tokens[5] = -7;
  const std::vector<BlockHash> hashes = HashFullBlocks(root, tokens, 4, "");
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hashes[0].ToHex(), "0d8a7931530a5a9ba08783b983f72145");
  EXPECT_EQ(hashes[1].ToHex(), "3ba8829471b0d946bc1ae70aea141e3e");
  EXPECT_EQ(HashFullBlocks(root, tokens, 4, "salt")[0].ToHex(), "b957972690c79da9cd69987eaf7779a6");
}

TEST(BlockHashTest, HexRoundTrip) {
  const BlockHash h{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(h.ToHex(), "0123456789abcdeffedcba9876543210");
  StatusOr<BlockHash> back = BlockHash::FromHex("0123456789ABCDEFfedcba9876543210");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, h);
  const std::array<uint8_t, 16> bytes = h.Bytes();
  EXPECT_EQ(bytes[0], 0x01);
  EXPECT_EQ(bytes[15], 0x10);
}

TEST(BlockHashTest, FromHexRejectsBadInput) {
  EXPECT_EQ(BlockHash::FromHex("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockHash::FromHex("0123").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockHash::FromHex(std::string(31, '0') + "g").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockHash::FromHex(std::string(33, '0')).status().code(), StatusCode::kInvalidArgument);
}

TEST(BlockHashTest, RootBindsEveryField) {
  const BlockHash base = ComputeRootHash("m", 16, "f16");
  EXPECT_EQ(base, ComputeRootHash("m", 16, "f16"));
  EXPECT_NE(base, ComputeRootHash("m2", 16, "f16"));
  EXPECT_NE(base, ComputeRootHash("m", 32, "f16"));
  EXPECT_NE(base, ComputeRootHash("m", 16, "q8_0"));
  // Length prefixes keep field boundaries unambiguous.
  EXPECT_NE(ComputeRootHash("ab", 16, "c"), ComputeRootHash("a", 16, "bc"));
}

TEST(BlockHashTest, OnlyFullBlocksAreHashed) {
  const BlockHash root = ComputeRootHash("m", 4, "f16");
  EXPECT_TRUE(HashFullBlocks(root, Iota(3), 4, "").empty());
  EXPECT_EQ(HashFullBlocks(root, Iota(4), 4, "").size(), 1u);
  EXPECT_EQ(HashFullBlocks(root, Iota(7), 4, "").size(), 1u);
  // A partial tail never changes the hashes of the full blocks before it.
  EXPECT_EQ(HashFullBlocks(root, Iota(8), 4, ""), HashFullBlocks(root, Iota(11), 4, ""));
}

TEST(BlockHashTest, ChainingDependsOnEarlierBlocks) {
  const BlockHash root = ComputeRootHash("m", 4, "f16");
  // Same second block (4..7), different first block.
  std::vector<int32_t> a = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<int32_t> b = {9, 1, 2, 3, 4, 5, 6, 7};
  const auto ha = HashFullBlocks(root, a, 4, "");
  const auto hb = HashFullBlocks(root, b, 4, "");
  EXPECT_NE(ha[0], hb[0]);
  EXPECT_NE(ha[1], hb[1]);
  // Same tokens in a different position in the chain hash differently too.
  std::vector<int32_t> c = {4, 5, 6, 7};
  EXPECT_NE(HashFullBlocks(root, c, 4, "")[0], ha[1]);
  // Extra bytes separate otherwise identical blocks.
  EXPECT_NE(HashFullBlocks(root, a, 4, "lora-1")[0], ha[0]);
}

TEST(BlockHashTest, IncrementalMatchesBatch) {
  const BlockHash root = ComputeRootHash("m", 16, "bf16");
  const std::vector<int32_t> tokens = Iota(200, 1000);
  BlockHasher hasher(root, 16, "x");
  size_t total_new = 0;
  for (size_t n = 0; n <= tokens.size(); ++n) {
    // Decode grows the sequence one token at a time.
    total_new += hasher.Update(std::span<const int32_t>(tokens).first(n));
    ASSERT_EQ(hasher.hashes().size(), n / 16);
  }
  EXPECT_EQ(total_new, 200u / 16);
  EXPECT_EQ(hasher.hashes(), HashFullBlocks(root, tokens, 16, "x"));
  // Chunked growth gives the same result.
  BlockHasher chunked(root, 16, "x");
  chunked.Update(std::span<const int32_t>(tokens).first(37));
  chunked.Update(tokens);
  EXPECT_EQ(chunked.hashes(), hasher.hashes());
}

// `env_prefix` runs the tool under a different environment (e.g. "env -i X=1 ").
std::string RunTool(const std::string& args, const std::string& env_prefix = "") {
  const std::string cmd = env_prefix + TANDEM_KV_HASH_TOOL_PATH + " " + args;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return "popen failed";
  std::string out;
  char buf[256];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int rc = pclose(pipe);
  if (rc != 0) out += "exit status " + std::to_string(rc);
  return out;
}

// The whole point of the scheme: the same prompt gives the same keys in other processes
// (and so on other nodes). Two separate runs of kv_hash_tool, with different environments,
// must agree with each other and with this process.
TEST(BlockHashTest, TwoProcessesAgree) {
  std::vector<int32_t> tokens = Iota(50, 151000);
  tokens[3] = -1;
  std::string args = "--fingerprint=gemma3-270m-q4km --block-size=16 --dtype=f16 --extra=salt";
  for (int32_t t : tokens) args += " " + std::to_string(t);

  const std::string first = RunTool(args);
  const std::string second = RunTool(args, "env -i TANDEM_UNRELATED=1 LANG=C ");
  const std::string third = RunTool("");  // different arguments: must differ
  EXPECT_EQ(first, second);
  EXPECT_NE(first, third);

  const BlockHash root = ComputeRootHash("gemma3-270m-q4km", 16, "f16");
  std::string expected = root.ToHex() + "\n";
  for (const BlockHash& h : HashFullBlocks(root, tokens, 16, "salt")) expected += h.ToHex() + "\n";
  EXPECT_EQ(first, expected);
  EXPECT_EQ(std::count(first.begin(), first.end(), '\n'), 1 + 50 / 16);
}

}  // namespace
}  // namespace tandem::kv
