#include "server/kv_transfer_params.h"

#include <gtest/gtest.h>

namespace tandem::server {
namespace {

TEST(KvTransferParamsTest, RoundTripsAProducerAnswer) {
  KvTransferParams p;
  p.remote_engine_id = "e";
  p.remote_request_id = "r";
  p.remote_host = "127.0.0.1";
  p.remote_port = 30000;
  p.remote_block_ids = {4, 5};
  p.remote_block_size = 16;
  p.num_prompt_blocks = 2;
  p.last_token_id = 7;
  RequestKvTransfer kv = ParseRequestKvTransfer(KvTransferParamsJson(p));
  ASSERT_TRUE(kv.remote_prefill.has_value()) << kv.problem;
  EXPECT_FALSE(kv.do_remote_decode);
  EXPECT_EQ(kv.remote_prefill->remote_host, "127.0.0.1");
  EXPECT_EQ(kv.remote_prefill->remote_block_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(kv.remote_prefill->last_token_id, 7);

  EXPECT_TRUE(ParseRequestKvTransfer(R"({"do_remote_decode":true})").do_remote_decode);
  EXPECT_FALSE(ParseRequestKvTransfer("").do_remote_decode);
}

// Found by review after fuzz/http_fuzz.cc's nlohmann exception finding: flags of another
// type than bool made Json::value throw (the client got a 500); they now count as not set.
TEST(KvTransferParamsTest, FlagsOfAnotherTypeAreNotTrue) {
  for (const char* json : {R"({"do_remote_decode":"yes","do_remote_prefill":"yes"})",
                           R"({"do_remote_decode":1,"do_remote_prefill":[true]})",
                           R"({"do_remote_decode":null,"do_remote_prefill":{}})"}) {
    RequestKvTransfer kv = ParseRequestKvTransfer(json);
    EXPECT_FALSE(kv.do_remote_decode) << json;
    EXPECT_FALSE(kv.remote_prefill.has_value()) << json;
  }
}

}  // namespace
}  // namespace tandem::server
