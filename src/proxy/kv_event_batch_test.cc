#include "proxy/kv_event_batch.h"

#include <gtest/gtest.h>

#include <string>

namespace tandem::proxy {
namespace {

using namespace std::string_literals;

// msgpack.packb([12.5, [
//   ["BlockStored", [b"\xaa"*16, b"\xbb"*16], b"\xcc"*16, [10, 11, 12, 13], 2, None, "GPU",
//    "extra", 7],                                  # newer trailing fields
//   ["BlockStored", [5], None, [1, 2], 2, 3, "GPU"],  # int hash (older vLLM), a LoRA
//   ["Unknown", 1, 2],
//   ["BlockRemoved", [b"\xaa"*16], "GPU"],
//   ["AllBlocksCleared"]], 0], use_bin_type=True)
const std::string kBatch =
    "\x93\xcb\x40\x29\x00\x00\x00\x00\x00\x00\x95\x99\xab\x42\x6c\x6f\x63\x6b\x53\x74\x6f\x72"
    "\x65\x64\x92\xc4\x10\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xc4"
    "\x10\xbb\xbb\xbb\xbb\xbb\xbb\xbb\xbb\xbb\xbb\xbb\xbb\xbb\xbb\xbb\xbb\xc4\x10\xcc\xcc\xcc"
    "\xcc\xcc\xcc\xcc\xcc\xcc\xcc\xcc\xcc\xcc\xcc\xcc\xcc\x94\x0a\x0b\x0c\x0d\x02\xc0\xa3\x47"
    "\x50\x55\xa5\x65\x78\x74\x72\x61\x07\x97\xab\x42\x6c\x6f\x63\x6b\x53\x74\x6f\x72\x65\x64"
    "\x91\x05\xc0\x92\x01\x02\x02\x03\xa3\x47\x50\x55\x93\xa7\x55\x6e\x6b\x6e\x6f\x77\x6e\x01"
    "\x02\x93\xac\x42\x6c\x6f\x63\x6b\x52\x65\x6d\x6f\x76\x65\x64\x91\xc4\x10\xaa\xaa\xaa\xaa"
    "\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xaa\xa3\x47\x50\x55\x91\xb0\x41\x6c\x6c\x42"
    "\x6c\x6f\x63\x6b\x73\x43\x6c\x65\x61\x72\x65\x64\x00"s;

TEST(KvEventBatchTest, DecodesVllmFieldOrder) {
  StatusOr<KvEventBatch> batch = DecodeKvEventBatch(kBatch);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_DOUBLE_EQ(batch->ts, 12.5);
  ASSERT_TRUE(batch->data_parallel_rank.has_value());
  EXPECT_EQ(*batch->data_parallel_rank, 0);
  ASSERT_EQ(batch->events.size(), 4u);  // the unknown tag is skipped
  const KvEvent& stored = batch->events[0];
  EXPECT_EQ(stored.kind, KvEvent::Kind::kBlockStored);
  ASSERT_EQ(stored.block_hashes.size(), 2u);
  EXPECT_EQ(stored.block_hashes[0], std::string(16, '\xaa'));
  EXPECT_EQ(stored.block_hashes[1], std::string(16, '\xbb'));
  EXPECT_EQ(stored.parent_block_hash, std::string(16, '\xcc'));
  EXPECT_EQ(stored.token_ids, (std::vector<int32_t>{10, 11, 12, 13}));
  EXPECT_EQ(stored.block_size, 2);
  EXPECT_FALSE(stored.has_lora);
  const KvEvent& lora = batch->events[1];
  EXPECT_EQ(lora.block_hashes[0], "\0\0\0\0\0\0\0\x05"s);
  EXPECT_FALSE(lora.parent_block_hash.has_value());
  EXPECT_TRUE(lora.has_lora);
  EXPECT_EQ(batch->events[2].kind, KvEvent::Kind::kBlockRemoved);
  EXPECT_EQ(batch->events[2].block_hashes, (std::vector<KvBlockHash>{std::string(16, '\xaa')}));
  EXPECT_EQ(batch->events[3].kind, KvEvent::Kind::kAllBlocksCleared);
}

TEST(KvEventBatchTest, MalformedPayloadsAreErrors) {
  for (size_t n = 0; n < kBatch.size(); ++n) {
    EXPECT_FALSE(DecodeKvEventBatch(std::string_view(kBatch).substr(0, n)).ok()) << n;
  }
  EXPECT_FALSE(DecodeKvEventBatch(kBatch + "\x01"s).ok());  // trailing bytes
  // [1.0, [["BlockStored", [], None, [1], -1]], None]: a negative block size
  EXPECT_FALSE(DecodeKvEventBatch("\x93\xcb\x3f\xf0\0\0\0\0\0\0\x91\x95\xab"
                                  "BlockStored\x90\xc0\x91\x01\xff\xc0"s)
                   .ok());
  // ["x", [], None]: ts is not a number
  EXPECT_FALSE(DecodeKvEventBatch("\x93\xa1x\x90\xc0"s).ok());
}

}  // namespace
}  // namespace tandem::proxy
