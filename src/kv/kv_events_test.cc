#include "kv/kv_events.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace tandem::kv {
namespace {

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 15]);
  }
  return hex;
}

// Bytes() is big-endian high then low, so these hashes are the bytes 01..10 and 11..20.
const BlockHash kH1{0x0102030405060708ULL, 0x090a0b0c0d0e0f10ULL};
const BlockHash kH2{0x1112131415161718ULL, 0x191a1b1c1d1e1f20ULL};

TEST(KvEventsTest, BatchEncodingMatchesVllm) {
  std::vector<KvEvent> events;
  events.push_back(BlockStored{{kH1, kH2}, std::nullopt, {1, 200, 70000, -1}, 2});
  events.push_back(BlockStored{{kH2}, kH1, {5, 6}, 2});
  events.push_back(BlockRemoved{{kH1}});
  events.push_back(AllBlocksCleared{});
  // h1, h2 = bytes(range(1, 17)), bytes(range(17, 33)); msgpack.packb(
  //   [1700000000.25, [["BlockStored", [h1, h2], None, [1, 200, 70000, -1], 2, None, "CPU",
  //    None], ["BlockStored", [h2], h1, [5, 6], 2, None, "CPU", None],
  //    ["BlockRemoved", [h1], "CPU"], ["AllBlocksCleared"]], 0], use_bin_type=True).hex()
  // which is what msgspec writes for vLLM's KVEventBatch with array_like structs.
  EXPECT_EQ(Hex(EncodeKvEventBatch(1700000000.25, events, 0)),
            "93cb41d954fc401000009498ab426c6f636b53746f72656492c4100102030405060708090a0b0c0d0e0f"
            "10c4101112131415161718191a1b1c1d1e1f20c09401ccc8ce00011170ff02c0a3435055c098ab426c6f"
            "636b53746f72656491c4101112131415161718191a1b1c1d1e1f20c4100102030405060708090a0b0c0d"
            "0e0f1092050602c0a3435055c093ac426c6f636b52656d6f76656491c4100102030405060708090a0b0c"
            "0d0e0f10a343505591b0416c6c426c6f636b73436c656172656400");
  EXPECT_EQ(Hex(EncodeKvEventBatch(1.5, {}, std::nullopt)), "93cb3ff800000000000090c0");
}

TEST(KvEventsTest, BatcherEmitsOneBatchPerStepWithEvents) {
  std::vector<std::pair<std::string, size_t>> emitted;
  KvEventBatcher batcher(
      3, [&](std::string payload, size_t n) { emitted.emplace_back(std::move(payload), n); },
      [] { return 2.0; });
  batcher.EndStep();  // nothing recorded: no batch
  EXPECT_TRUE(emitted.empty());
  batcher.Record(BlockRemoved{{kH1}});
  batcher.Record(AllBlocksCleared{});
  batcher.EndStep();
  ASSERT_EQ(emitted.size(), 1u);
  std::vector<KvEvent> expected = {BlockRemoved{{kH1}}, AllBlocksCleared{}};
  EXPECT_EQ(emitted[0].first, EncodeKvEventBatch(2.0, expected, 3));
  EXPECT_EQ(emitted[0].second, 2u);
  batcher.EndStep();  // the step's events were consumed
  EXPECT_EQ(emitted.size(), 1u);
}

// The prefix-cache hooks.

class RecordingSink : public KvEventSink {
 public:
  void Record(KvEvent event) override { events.push_back(std::move(event)); }
  void EndStep() override {}
  std::vector<KvEvent> events;
};

constexpr int32_t kBlock = 4;

KvCacheConfig Config(int32_t num_blocks, bool prefix_caching = true) {
  KvCacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size_tokens = kBlock;
  c.enable_prefix_caching = prefix_caching;
  c.model_fingerprint = "test-model";
  return c;
}

std::vector<int32_t> Tokens(int32_t n, int32_t start = 100) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

void Prefill(KvCacheManager& m, const std::string& id, const std::vector<int32_t>& prompt) {
  ComputedBlocks hit = m.GetComputedBlocks(id, prompt);
  const int32_t n_new = static_cast<int32_t>(prompt.size()) - hit.num_computed_tokens;
  ASSERT_TRUE(m.AllocateSlots(id, hit.num_computed_tokens, n_new, hit).has_value());
  m.CacheComputedBlocks(id, prompt, static_cast<int32_t>(prompt.size()));
}

TEST(KvEventsTest, StoredBlocksCarryHashesParentAndTokens) {
  KvCacheManager m(Config(16));
  RecordingSink sink;
  m.set_event_sink(&sink);
  const std::vector<int32_t> prompt = Tokens(10);  // 2 full blocks + 2 tokens
  Prefill(m, "a", prompt);
  ASSERT_EQ(sink.events.size(), 1u);
  const auto& stored = std::get<BlockStored>(sink.events[0]);
  const std::vector<BlockHash>& hashes = m.GetBlockHashes("a");
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(stored.block_hashes, hashes);
  EXPECT_FALSE(stored.parent_block_hash.has_value());
  EXPECT_EQ(stored.token_ids, std::vector<int32_t>(prompt.begin(), prompt.begin() + 8));
  EXPECT_EQ(stored.block_size, kBlock);
  EXPECT_EQ(stored.medium, "CPU");
  // The keys are the prefix cache's own: HashFullBlocks over the same tokens.
  const BlockHash root = ComputeRootHash("test-model", kBlock, "f16");
  EXPECT_EQ(stored.block_hashes, HashFullBlocks(root, prompt, kBlock, ""));

  // Decode fills block 2: one more event, chained to block 1.
  std::vector<int32_t> grown = prompt;
  grown.push_back(7);
  grown.push_back(8);
  ASSERT_TRUE(m.AllocateSlots("a", 10, 2).has_value());
  m.CacheComputedBlocks("a", grown, 12);
  ASSERT_EQ(sink.events.size(), 2u);
  const auto& next = std::get<BlockStored>(sink.events[1]);
  ASSERT_EQ(next.block_hashes.size(), 1u);
  EXPECT_EQ(next.block_hashes[0], m.GetBlockHashes("a")[2]);
  EXPECT_EQ(next.parent_block_hash, hashes[1]);
  EXPECT_EQ(next.token_ids, (std::vector<int32_t>{108, 109, 7, 8}));

  // A second request sharing two blocks reports only the block it adds.
  std::vector<int32_t> other(prompt.begin(), prompt.begin() + 8);
  for (int32_t t : {50, 51, 52, 53, 54}) other.push_back(t);
  Prefill(m, "b", other);
  ASSERT_EQ(sink.events.size(), 3u);
  const auto& shared = std::get<BlockStored>(sink.events[2]);
  EXPECT_EQ(shared.parent_block_hash, hashes[1]);
  EXPECT_EQ(shared.token_ids, (std::vector<int32_t>{50, 51, 52, 53}));
  // Freeing keeps blocks cached: nothing is removed.
  m.Free("a");
  m.Free("b");
  EXPECT_EQ(sink.events.size(), 3u);
}

TEST(KvEventsTest, NothingOutsideThePrefixCacheIsReported) {
  {
    KvCacheManager off(Config(16, /*prefix_caching=*/false));
    RecordingSink sink;
    off.set_event_sink(&sink);
    Prefill(off, "a", Tokens(12));
    off.Free("a");
    Prefill(off, "b", Tokens(60, 900));  // reuses every block: still nothing cached to drop
    EXPECT_TRUE(sink.events.empty());
  }
  // Two requests compute the same content at once: only the first registration counts.
  KvCacheManager m(Config(16));
  RecordingSink sink;
  m.set_event_sink(&sink);
  const std::vector<int32_t> prompt = Tokens(9);
  ASSERT_TRUE(m.AllocateSlots("a", 0, 9, m.GetComputedBlocks("a", prompt)).has_value());
  ASSERT_TRUE(m.AllocateSlots("b", 0, 9, m.GetComputedBlocks("b", prompt)).has_value());
  m.CacheComputedBlocks("a", prompt, 9);
  m.CacheComputedBlocks("b", prompt, 9);
  ASSERT_EQ(sink.events.size(), 1u);
  EXPECT_EQ(std::get<BlockStored>(sink.events[0]).block_hashes.size(), 2u);
  // b's private copies are recycled uncached: reusing them removes nothing.
  m.Free("b");
  sink.events.clear();
  ASSERT_TRUE(m.AllocateSlots("c", 0, 8).has_value());  // the 3 blocks b freed come first
  EXPECT_TRUE(sink.events.empty());
}

TEST(KvEventsTest, EvictionAndResetAreReported) {
  KvCacheManager m(Config(4));
  RecordingSink sink;
  m.set_event_sink(&sink);
  const std::vector<int32_t> prompt = Tokens(12);  // 3 full blocks
  Prefill(m, "a", prompt);
  const std::vector<BlockHash> hashes = m.GetBlockHashes("a");
  m.Free("a");  // tail first: blocks 2, 1, 0 join the LRU in that order
  sink.events.clear();
  // 3 blocks for another request: the never-used block 3 first, then a's last two blocks.
  ASSERT_TRUE(m.AllocateSlots("b", 0, 12).has_value());
  ASSERT_EQ(sink.events.size(), 1u);
  EXPECT_EQ(std::get<BlockRemoved>(sink.events[0]).block_hashes,
            (std::vector<BlockHash>{hashes[2], hashes[1]}));
  EXPECT_EQ(std::get<BlockRemoved>(sink.events[0]).medium, "CPU");
  sink.events.clear();
  m.ResetPrefixCache();
  ASSERT_EQ(sink.events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(sink.events[0]));
  // Without a sink nothing is recorded anywhere.
  m.set_event_sink(nullptr);
  m.Free("b");
  Prefill(m, "c", prompt);
  EXPECT_EQ(sink.events.size(), 1u);
}

}  // namespace
}  // namespace tandem::kv
