// HfCheckpoint: a tiny llama checkpoint written here (config.json, two shards and their
// index) read as a ModelSource — the GGUF keys, the q/k permutation, tensors used in
// place — and the bad directories a user may hand it, each refused naming the problem.
#include "model/hf_checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/little_endian.h"
#include "model/model.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

struct Tensor {
  std::string dtype;  // "F32" or "BF16"
  std::vector<int64_t> shape;
  std::vector<float> values;  // BF16: the top 16 bits of each float are stored
};

// Writes a safetensors file of `tensors` (in name order).
void WriteSafetensors(const fs::path& path, const std::map<std::string, Tensor>& tensors) {
  std::string header = "{";
  std::vector<uint8_t> data;
  for (const auto& [name, t] : tensors) {
    const size_t begin = data.size();
    for (float v : t.values) {
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      if (t.dtype == "BF16") {
        const uint16_t h = static_cast<uint16_t>(bits >> 16);
        data.push_back(static_cast<uint8_t>(h & 0xff));
        data.push_back(static_cast<uint8_t>(h >> 8));
      } else {
        for (int b = 0; b < 4; ++b) data.push_back(static_cast<uint8_t>(bits >> (8 * b)));
      }
    }
    std::string shape;
    for (int64_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    header += (header.size() > 1 ? "," : "") + std::string("\"") + name + "\":{\"dtype\":\"" + t.dtype +
              "\",\"shape\":[" + shape + "],\"data_offsets\":[" + std::to_string(begin) + "," +
              std::to_string(data.size()) + "]}";
  }
  header += "}";
  std::ofstream out(path, std::ios::binary);
  uint8_t len[8];
  little_endian::Store<uint64_t>(len, header.size());
  out.write(reinterpret_cast<const char*>(len), 8);
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

void WriteText(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

Tensor Values(const std::string& dtype, std::vector<int64_t> shape, float base) {
  Tensor t{dtype, std::move(shape), {}};
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  for (int64_t i = 0; i < n; ++i) t.values.push_back(base + static_cast<float>(i));  // exact in BF16 below 256
  return t;
}

constexpr int kEmbd = 8, kHeads = 2, kKvHeads = 1, kHeadDim = 4, kFf = 16, kVocab = 12;

const char* kConfig = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
  "num_attention_heads": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-5,
  "rope_theta": 500000.0, "max_position_embeddings": 256, "vocab_size": 12,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})";

class HfCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem_hf_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    WriteText(dir_ / "config.json", kConfig);
    shard1_ = {{"model.embed_tokens.weight", Values("BF16", {kVocab, kEmbd}, 1)},
               {"model.norm.weight", Values("F32", {kEmbd}, 0.5f)},
               {"lm_head.weight", Values("BF16", {kVocab, kEmbd}, 2)},
               {"model.layers.0.input_layernorm.weight", Values("F32", {kEmbd}, 1)},
               {"model.layers.0.post_attention_layernorm.weight", Values("F32", {kEmbd}, 2)},
               {"model.layers.0.self_attn.q_proj.weight", Values("BF16", {kHeads * kHeadDim, kEmbd}, 0)},
               {"model.layers.0.self_attn.k_proj.weight", Values("BF16", {kKvHeads * kHeadDim, kEmbd}, 0)}};
    shard2_ = {{"model.layers.0.self_attn.v_proj.weight", Values("BF16", {kKvHeads * kHeadDim, kEmbd}, 3)},
               {"model.layers.0.self_attn.o_proj.weight", Values("BF16", {kEmbd, kHeads * kHeadDim}, 4)},
               {"model.layers.0.mlp.gate_proj.weight", Values("BF16", {kFf, kEmbd}, 5)},
               {"model.layers.0.mlp.up_proj.weight", Values("BF16", {kFf, kEmbd}, 6)},
               {"model.layers.0.mlp.down_proj.weight", Values("BF16", {kEmbd, kFf}, 7)},
               {"model.layers.0.self_attn.rotary_emb.inv_freq", Values("F32", {2}, 1)}};
    WriteShards();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void WriteShards() {
    WriteSafetensors(dir_ / "model-00001-of-00002.safetensors", shard1_);
    WriteSafetensors(dir_ / "model-00002-of-00002.safetensors", shard2_);
    std::string map;
    for (const auto& [n, t] : shard1_) map += (map.empty() ? "" : ",") + ("\"" + n + "\":\"model-00001-of-00002.safetensors\"");
    for (const auto& [n, t] : shard2_) map += ",\"" + n + "\":\"model-00002-of-00002.safetensors\"";
    WriteText(dir_ / "model.safetensors.index.json", "{\"metadata\":{\"total_size\":1},\"weight_map\":{" + map + "}}");
  }

  void ExpectRefused(const std::string& words) {
    auto c = HfCheckpoint::Open(dir_.string());
    ASSERT_FALSE(c.ok()) << "accepted; expected: " << words;
    EXPECT_NE(c.status().message().find(words), std::string::npos) << c.status().message();
  }

  fs::path dir_;
  std::map<std::string, Tensor> shard1_, shard2_;
};

TEST_F(HfCheckpointTest, ReadsTheConfigAsGgufKeysAndBindsEveryTensor) {
  ASSERT_TRUE(IsHfCheckpointDir(dir_.string()));
  auto c = HfCheckpoint::Open(dir_.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  const HfCheckpoint& ck = **c;
  EXPECT_EQ(ck.GetString("general.architecture").value(), "llama");
  EXPECT_EQ(ck.GetUint("llama.block_count").value(), 1u);
  EXPECT_EQ(ck.GetUint("llama.attention.head_count_kv").value(), 1u);
  EXPECT_EQ(ck.GetUint("llama.context_length").value(), 256u);
  EXPECT_FLOAT_EQ(static_cast<float>(ck.GetFloat("llama.rope.freq_base").value()), 500000.0f);
  EXPECT_EQ(ck.vocab_size(), kVocab);
  ASSERT_EQ(ck.unused().size(), 1u);
  EXPECT_EQ(ck.unused()[0], "model.layers.0.self_attn.rotary_emb.inv_freq");

  auto config = LoadModelConfig(ck);
  ASSERT_TRUE(config.ok()) << config.status().message();
  config->n_vocab = kVocab;
  EXPECT_FALSE(config->tied_output);
  EXPECT_FALSE(config->rope_neox);
  auto weights = BindWeights(ck, *config);
  ASSERT_TRUE(weights.ok()) << weights.status().message();
  EXPECT_EQ(weights->layers[0].wv.type, TensorType::kBF16);
  EXPECT_EQ(weights->layers[0].ffn_norm[0], 2.0f);

  // Used in place: v_proj's data is the shard's own bytes.
  const GgufTensorInfo* v = ck.FindTensor("blk.0.attn_v.weight");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->dims, (std::vector<int64_t>{kEmbd, kKvHeads * kHeadDim}));

  // q rows permuted per head from (half, pair) to (pair, half): GGUF row 2i + j of a
  // head is HF row j * (head_dim / 2) + i; row r of the fixture holds values r * 8 + k.
  const GgufTensorInfo* q = ck.FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  auto row_first = [&](int64_t row) {
    uint16_t h;
    std::memcpy(&h, q->data + row * kEmbd * 2, 2);
    uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  const int half = kHeadDim / 2;
  for (int h = 0; h < kHeads; ++h) {
    for (int i = 0; i < half; ++i) {
      for (int j = 0; j < 2; ++j) {
        EXPECT_EQ(row_first(h * kHeadDim + 2 * i + j), static_cast<float>((h * kHeadDim + j * half + i) * kEmbd))
            << "head " << h << " i " << i << " j " << j;
      }
    }
  }
  ASSERT_FALSE(ck.conversions().empty());
  EXPECT_NE(ck.conversions()[0].find("permuted"), std::string::npos);
}

TEST_F(HfCheckpointTest, Llama3RopeScalingBecomesTheFrequencyFactors) {
  std::string config = kConfig;
  config.insert(config.rfind('}'), R"(, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})");
  WriteText(dir_ / "config.json", config);
  auto c = HfCheckpoint::Open(dir_.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto mc = LoadModelConfig(**c);
  ASSERT_TRUE(mc.ok()) << mc.status().message();
  // head_dim 4: pair 0's wavelength 2 pi is short (factor 1); pair 1's, 2 pi sqrt(5e5),
  // lies between 8192 / 4 and 8192: smooth = (8192 / wavelen - 1) / 3.
  ASSERT_EQ(mc->rope_freq_factors.size(), 2u);
  EXPECT_EQ(mc->rope_freq_factors[0], 1.0f);
  const double wavelen = 2 * M_PI * std::sqrt(500000.0), smooth = (8192 / wavelen - 1) / 3;
  EXPECT_NEAR(mc->rope_freq_factors[1], 1 / ((1 - smooth) / 8 + smooth), 1e-5);
}

// A GPT-2-style byte-level tokenizer.json of the fixture's 12 tokens.
void WriteTokenizer(const fs::path& dir) {
  std::string vocab;
  for (int i = 0; i < kVocab; ++i) vocab += (i ? "," : "") + std::string("\"") + static_cast<char>('a' + i) + "\":" + std::to_string(i);
  WriteText(dir / "tokenizer.json",
            "{\"model\": {\"type\": \"BPE\", \"vocab\": {" + vocab + "}, \"merges\": []}, \"added_tokens\": [],"
            " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true},"
            " \"decoder\": {\"type\": \"ByteLevel\"}}");
}

TEST_F(HfCheckpointTest, LoadsAsAModelWhoseFingerprintNamesTheWeights) {
  WriteTokenizer(dir_);
  auto a = Model::Load(dir_.string());
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ((*a)->config().n_vocab, kVocab);
  EXPECT_EQ((*a)->tokenizer().Encode("abc", false, false), (std::vector<int32_t>{0, 1, 2}));
  auto again = Model::Load(dir_.string());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->fingerprint(), (*a)->fingerprint());
  // One weight changed: another fingerprint (the blocks of the two never mix).
  shard2_["model.layers.0.mlp.up_proj.weight"].values[3] += 1.0f;
  WriteShards();
  auto changed = Model::Load(dir_.string());
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_NE((*changed)->fingerprint(), (*a)->fingerprint());
}

TEST_F(HfCheckpointTest, ATokenizerJsonOfAnUnknownModelTypeIsNamed) {
  WriteText(dir_ / "tokenizer.json", R"({"model": {"type": "WordPiece", "vocab": {}}})");
  auto m = Model::Load(dir_.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("WordPiece"), std::string::npos) << m.status().message();
}

TEST_F(HfCheckpointTest, AMissingShardIsNamed) {
  fs::remove(dir_ / "model-00002-of-00002.safetensors");
  ExpectRefused("model-00002-of-00002.safetensors");
}

TEST_F(HfCheckpointTest, AnIndexNamingATensorNoShardHasIsNamed) {
  WriteText(dir_ / "model.safetensors.index.json",
            "{\"weight_map\":{\"model.embed_tokens.weight\":\"model-00001-of-00002.safetensors\","
            "\"model.layers.0.mlp.extra.weight\":\"model-00002-of-00002.safetensors\"}}");
  ExpectRefused("model.layers.0.mlp.extra.weight");
}

TEST_F(HfCheckpointTest, AnUnknownArchitectureIsNamed) {
  std::string config = kConfig;
  config.replace(config.find("LlamaForCausalLM"), 16, "MambaForCausalLM");
  WriteText(dir_ / "config.json", config);
  ExpectRefused("MambaForCausalLM");
}

TEST_F(HfCheckpointTest, AConfigFieldOfTheWrongTypeIsNamed) {
  std::string config = kConfig;
  config.replace(config.find("\"hidden_size\": 8"), 16, "\"hidden_size\": \"8\"");
  WriteText(dir_ / "config.json", config);
  ExpectRefused("hidden_size");
}

TEST_F(HfCheckpointTest, AnUnsupportedQuantizationSchemeIsNamed) {
  std::string config = kConfig;
  config.insert(config.rfind('}'), ", \"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4}");
  WriteText(dir_ / "config.json", config);
  ExpectRefused("gptq");
}

TEST_F(HfCheckpointTest, AWrongShapeIsNamed) {
  shard2_["model.layers.0.mlp.up_proj.weight"] = Values("BF16", {kFf + 1, kEmbd}, 6);
  WriteShards();
  auto c = HfCheckpoint::Open(dir_.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto config = LoadModelConfig(**c);
  ASSERT_TRUE(config.ok());
  config->n_vocab = kVocab;
  auto weights = BindWeights(**c, *config);
  ASSERT_FALSE(weights.ok());
  EXPECT_NE(weights.status().message().find("blk.0.ffn_up.weight"), std::string::npos) << weights.status().message();
}

TEST_F(HfCheckpointTest, ATruncatedShardIsRefused) {
  const fs::path p = dir_ / "model-00002-of-00002.safetensors";
  fs::resize_file(p, fs::file_size(p) - 3);
  ExpectRefused("model-00002-of-00002.safetensors");
}

}  // namespace
}  // namespace tandem
