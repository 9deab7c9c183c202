#include "proxy/prefix_index.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace tandem::proxy {
namespace {

KvBlockHash H(char c) { return KvBlockHash(16, c); }

KvEvent Stored(std::vector<KvBlockHash> hashes, std::optional<KvBlockHash> parent,
               std::vector<int32_t> tokens, int64_t block_size = 2) {
  KvEvent e;
  e.kind = KvEvent::Kind::kBlockStored;
  e.block_hashes = std::move(hashes);
  e.parent_block_hash = std::move(parent);
  e.token_ids = std::move(tokens);
  e.block_size = block_size;
  return e;
}

KvEvent Removed(std::vector<KvBlockHash> hashes) {
  KvEvent e;
  e.kind = KvEvent::Kind::kBlockRemoved;
  e.block_hashes = std::move(hashes);
  return e;
}

// instance -> cached tokens
std::map<int, int64_t> MatchMap(const PrefixIndex& index, std::vector<int32_t> tokens) {
  std::map<int, int64_t> out;
  for (const auto& m : index.MatchPrefix(tokens)) out[m.instance] = m.cached_tokens;
  return out;
}

TEST(PrefixIndexTest, MatchesTheChainOfLeadingBlocks) {
  PrefixIndex index;
  // Instance 0 holds [1 2][3 4][5 6] (one event, three blocks), instance 1 the first two.
  index.Apply(0, Stored({H('a'), H('b'), H('c')}, std::nullopt, {1, 2, 3, 4, 5, 6}));
  index.Apply(1, Stored({H('a')}, std::nullopt, {1, 2}));
  index.Apply(1, Stored({H('b')}, H('a'), {3, 4}));
  EXPECT_EQ(index.num_blocks(), 3u);
  EXPECT_EQ((MatchMap(index, {1, 2, 3, 4, 5, 6, 7})), (std::map<int, int64_t>{{0, 6}, {1, 4}}));
  EXPECT_EQ((MatchMap(index, {1, 2, 3, 4, 5})), (std::map<int, int64_t>{{0, 4}, {1, 4}}));
  EXPECT_EQ((MatchMap(index, {1, 2, 9, 9, 5, 6})), (std::map<int, int64_t>{{0, 2}, {1, 2}}));
  EXPECT_TRUE(MatchMap(index, {9, 9, 3, 4}).empty());
  EXPECT_TRUE(MatchMap(index, {1}).empty());  // no whole block
  // Longest first.
  auto matches = index.MatchPrefix(std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  ASSERT_EQ(matches.size(), 2u);
  EXPECT_EQ(matches[0].instance, 0);
}

TEST(PrefixIndexTest, SameTokensUnderAnotherParentDoNotMatch) {
  PrefixIndex index;
  index.Apply(0, Stored({H('a')}, std::nullopt, {1, 2}));
  index.Apply(1, Stored({H('x')}, std::nullopt, {7, 7}));
  index.Apply(1, Stored({H('y')}, H('x'), {3, 4}));  // [3 4] after [7 7], not after [1 2]
  EXPECT_EQ((MatchMap(index, {1, 2, 3, 4})), (std::map<int, int64_t>{{0, 2}}));
  EXPECT_EQ((MatchMap(index, {7, 7, 3, 4})), (std::map<int, int64_t>{{1, 4}}));
}

TEST(PrefixIndexTest, AnInstanceMissingAnEarlierBlockStopsThere) {
  PrefixIndex index;
  index.Apply(0, Stored({H('a'), H('b')}, std::nullopt, {1, 2, 3, 4}));
  index.Apply(1, Stored({H('b')}, H('a'), {3, 4}));  // holds block 1 without block 0
  EXPECT_EQ((MatchMap(index, {1, 2, 3, 4})), (std::map<int, int64_t>{{0, 4}}));
}

TEST(PrefixIndexTest, BlockRemovedEvicts) {
  PrefixIndex index;
  index.Apply(0, Stored({H('a'), H('b')}, std::nullopt, {1, 2, 3, 4}));
  index.Apply(1, Stored({H('a'), H('b')}, std::nullopt, {1, 2, 3, 4}));
  index.Apply(0, Removed({H('b')}));
  EXPECT_EQ((MatchMap(index, {1, 2, 3, 4})), (std::map<int, int64_t>{{0, 2}, {1, 4}}));
  EXPECT_EQ(index.num_blocks(), 2u);          // instance 1 still holds b
  index.Apply(1, Removed({H('b'), H('z')}));  // an unknown hash is ignored
  EXPECT_EQ(index.num_blocks(), 1u);
  EXPECT_EQ(index.num_blocks(0), 1u);
  EXPECT_EQ((MatchMap(index, {1, 2, 3, 4})), (std::map<int, int64_t>{{0, 2}, {1, 2}}));
  // Stored again after eviction: found again.
  index.Apply(1, Stored({H('b')}, H('a'), {3, 4}));
  EXPECT_EQ((MatchMap(index, {1, 2, 3, 4})), (std::map<int, int64_t>{{0, 2}, {1, 4}}));
}

TEST(PrefixIndexTest, AllBlocksClearedAndDropInstance) {
  PrefixIndex index;
  index.Apply(0, Stored({H('a'), H('b')}, std::nullopt, {1, 2, 3, 4}));
  index.Apply(1, Stored({H('a')}, std::nullopt, {1, 2}));
  KvEvent cleared;
  cleared.kind = KvEvent::Kind::kAllBlocksCleared;
  index.Apply(0, cleared);
  EXPECT_EQ(index.num_blocks(0), 0u);
  EXPECT_EQ(index.num_blocks(), 1u);
  EXPECT_EQ((MatchMap(index, {1, 2, 3, 4})), (std::map<int, int64_t>{{1, 2}}));
  index.DropInstance(1);
  EXPECT_EQ(index.num_blocks(), 0u);
  EXPECT_TRUE(MatchMap(index, {1, 2, 3, 4}).empty());
}

TEST(PrefixIndexTest, MalformedLoraAndOverCapacityBlocksAreNotIndexed) {
  PrefixIndex index(/*max_blocks=*/2);
  index.Apply(0, Stored({H('a'), H('b')}, std::nullopt, {1, 2, 3}));  // 3 tokens for 2 blocks
  EXPECT_EQ(index.num_blocks(), 0u);
  EXPECT_EQ(index.num_rejected(), 2u);
  KvEvent lora = Stored({H('l')}, std::nullopt, {1, 2});
  lora.has_lora = true;
  index.Apply(0, lora);
  EXPECT_EQ(index.num_blocks(), 0u);
  index.Apply(0, Stored({H('a'), H('b'), H('c')}, std::nullopt, {1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(index.num_blocks(), 2u);
  EXPECT_EQ((MatchMap(index, {1, 2, 3, 4, 5, 6})), (std::map<int, int64_t>{{0, 4}}));
}

TEST(PrefixIndexTest, BlockSizesAreTakenFromTheEvents) {
  PrefixIndex index;
  index.Apply(0, Stored({H('a')}, std::nullopt, {1, 2, 3, 4}, /*block_size=*/4));
  EXPECT_EQ(index.block_size(0), 4);
  EXPECT_EQ((MatchMap(index, {1, 2, 3, 4, 5})), (std::map<int, int64_t>{{0, 4}}));
  EXPECT_TRUE(MatchMap(index, {1, 2, 3}).empty());
}

}  // namespace
}  // namespace tandem::proxy
