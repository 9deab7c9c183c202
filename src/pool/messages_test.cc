#include "pool/messages.h"

#include <gtest/gtest.h>

namespace tandem::pool {
namespace {

TEST(MessagesTest, RequestsRoundTrip) {
  HelloRequest hello;
  ASSERT_TRUE(DecodeHelloRequest(EncodeHelloRequest({"secret", 1}), &hello).ok());
  EXPECT_EQ(hello.auth_token, "secret");
  EXPECT_EQ(hello.role, 1);

  std::vector<std::string> keys;
  ASSERT_TRUE(DecodeKeys(EncodeKeys({"a", "bc"}), &keys).ok());
  EXPECT_EQ(keys, (std::vector<std::string>{"a", "bc"}));

  std::vector<PutAllocItem> alloc;
  ASSERT_TRUE(DecodePutAllocRequest(EncodePutAllocRequest({{"k", 4096}, {"l", 1}}), &alloc).ok());
  ASSERT_EQ(alloc.size(), 2u);
  EXPECT_EQ(alloc[0].key, "k");
  EXPECT_EQ(alloc[0].size_bytes, 4096u);

  std::vector<PutSealItem> seal;
  ASSERT_TRUE(DecodePutSealRequest(EncodePutSealRequest({{"k", true}, {"l", false}}), &seal).ok());
  ASSERT_EQ(seal.size(), 2u);
  EXPECT_TRUE(seal[0].commit);
  EXPECT_FALSE(seal[1].commit);

  DirUpdateRequest dir;
  ASSERT_TRUE(DecodeDirUpdateRequest(EncodeDirUpdateRequest({"127.0.0.1:5", {"x"}}), &dir).ok());
  EXPECT_EQ(dir.holder, "127.0.0.1:5");
  EXPECT_EQ(dir.keys, (std::vector<std::string>{"x"}));

  uint32_t ttl_ms = 0;
  keys.clear();
  ASSERT_TRUE(DecodeSoftPinRequest(EncodeSoftPinRequest(60000, {"hot"}), &ttl_ms, &keys).ok());
  EXPECT_EQ(ttl_ms, 60000u);
  EXPECT_EQ(keys, (std::vector<std::string>{"hot"}));
  std::string truncated = EncodeSoftPinRequest(1, {"hot"});
  truncated.pop_back();
  EXPECT_FALSE(DecodeSoftPinRequest(truncated, &ttl_ms, &keys).ok());
}

TEST(MessagesTest, ResponsesRoundTrip) {
  HelloResponse hello;
  ASSERT_TRUE(DecodeHelloResponse(EncodeHelloResponse({1 << 20, "127.0.0.1:7"}), &hello).ok());
  EXPECT_EQ(hello.arena_bytes, 1u << 20);
  EXPECT_EQ(hello.worker_address, "127.0.0.1:7");

  std::vector<PutAllocAnswer> alloc;
  ASSERT_TRUE(DecodePutAllocResponse(EncodePutAllocResponse({{0, 64}, {2, 0}}), 2, &alloc).ok());
  EXPECT_EQ(alloc[0].offset, 64u);
  EXPECT_EQ(alloc[1].code, 2);

  std::vector<GetAnswer> get;
  ASSERT_TRUE(DecodeGetResponse(EncodeGetResponse({{1, 8, 16}}), 1, &get).ok());
  EXPECT_EQ(get[0].code, 1);
  EXPECT_EQ(get[0].offset, 8u);
  EXPECT_EQ(get[0].size_bytes, 16u);

  std::vector<uint8_t> codes;
  ASSERT_TRUE(DecodeCodes(EncodeCodes({0, 1, 2}), 3, &codes).ok());
  EXPECT_EQ(codes, (std::vector<uint8_t>{0, 1, 2}));

  std::vector<std::string> holders;
  ASSERT_TRUE(DecodeDirLookupResponse(EncodeDirLookupResponse({"", "h:1"}), 2, &holders).ok());
  EXPECT_EQ(holders, (std::vector<std::string>{"", "h:1"}));

  std::string fetch = EncodeFetchHead(3) + "abc" + EncodeFetchHead(std::nullopt);
  std::vector<std::optional<std::string_view>> objects;
  ASSERT_TRUE(DecodeFetchResponse(fetch, 2, &objects).ok());
  ASSERT_TRUE(objects[0].has_value());
  EXPECT_EQ(*objects[0], "abc");
  EXPECT_FALSE(objects[1].has_value());
}

TEST(MessagesTest, MalformedBodiesAreInvalidArgument) {
  HelloRequest hello;
  EXPECT_EQ(DecodeHelloRequest(EncodeHelloRequest({"t", 0}) + "x", &hello).code(),
            StatusCode::kInvalidArgument);  // trailing byte
  std::vector<std::string> keys;
  EXPECT_FALSE(DecodeKeys(EncodeKeys({""}), &keys).ok());           // empty key
  EXPECT_FALSE(DecodeKeys(EncodeKeys({"a", "b"}), &keys, 1).ok());  // over the count limit
  std::vector<PutAllocItem> alloc;
  std::string body = EncodePutAllocRequest({{"k", 1}});
  EXPECT_FALSE(DecodePutAllocRequest(body.substr(0, body.size() - 1), &alloc).ok());

  // Response counts the body cannot hold are refused before anything is allocated.
  std::vector<GetAnswer> get;
  EXPECT_FALSE(DecodeGetResponse("", size_t{1} << 60, &get).ok());
  EXPECT_FALSE(DecodeGetResponse(EncodeGetResponse({{0, 0, 0}}), 2, &get).ok());
  std::vector<std::string> holders;
  EXPECT_FALSE(DecodeDirLookupResponse("", size_t{1} << 60, &holders).ok());
  std::vector<std::optional<std::string_view>> objects;
  EXPECT_FALSE(DecodeFetchResponse("", size_t{1} << 60, &objects).ok());
  std::string huge = EncodeFetchHead(1u << 31);
  EXPECT_FALSE(DecodeFetchResponse(huge, 1, &objects).ok());  // over kMaxObjectBytes
  std::vector<uint8_t> codes;
  EXPECT_FALSE(DecodeCodes("ab", 3, &codes).ok());
}

}  // namespace
}  // namespace tandem::pool
