// MoeFfn and RouteTokens: expert selection as llama.cpp's build_moe_ffn makes it, the
// grouped GEMMs against a naive float reference, and batch / thread-count invariance.
#include "model/moe_ffn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/thread_pool.h"
#include "kernels/dequant.h"
#include "model/model.h"
#include "model/test_paths.h"

namespace tandem {
namespace {

MoeConfig Softmax8Of64() {
  MoeConfig m;
  m.n_expert = 64;
  m.n_expert_used = 8;
  m.gating = ExpertGating::kSoftmax;
  m.norm_weights = true;
  return m;
}

std::vector<float> RandomLogits(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(RouteTokensTest, SoftmaxTopKNormalizedBestFirst) {
  const MoeConfig m = Softmax8Of64();
  const std::vector<float> logits = RandomLogits(2 * 64, 1);
  std::vector<int32_t> experts(16);
  std::vector<float> weights(16);
  RouteTokens(m, logits.data(), nullptr, 2, experts.data(), weights.data());
  for (int t = 0; t < 2; ++t) {
    const float* lg = &logits[t * 64];
    // Reference: the 8 largest logits, weights = their softmax renormalized over the 8.
    std::vector<int> order(64);
    for (int i = 0; i < 64; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return lg[a] > lg[b]; });
    double sum = 0;
    for (int i = 0; i < 8; ++i) sum += std::exp(static_cast<double>(lg[order[i]]));
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(experts[t * 8 + i], order[i]) << "token " << t << " slot " << i;
      EXPECT_NEAR(weights[t * 8 + i], std::exp(static_cast<double>(lg[order[i]])) / sum, 1e-6);
    }
  }
}

TEST(RouteTokensTest, SigmoidBiasSelectsButDoesNotWeight) {
  MoeConfig m;
  m.n_expert = 4;
  m.n_expert_used = 2;
  m.gating = ExpertGating::kSigmoid;
  m.probs_bias = true;
  m.norm_weights = false;
  m.weights_scale = 2.5f;
  const float logits[4] = {3.0f, 2.0f, 1.0f, 0.0f};
  const float bias[4] = {0.0f, 0.0f, 0.0f, 1.0f};  // lifts expert 3 to the top
  int32_t experts[2];
  float weights[2];
  RouteTokens(m, logits, bias, 1, experts, weights);
  EXPECT_EQ(experts[0], 3);  // sigmoid(0) + 1 = 1.5 beats sigmoid(3) = 0.95
  EXPECT_EQ(experts[1], 0);
  EXPECT_FLOAT_EQ(weights[0], 2.5f * 0.5f);  // the unbiased probability, scaled
  EXPECT_FLOAT_EQ(weights[1], 2.5f * (1.0f / (1.0f + std::exp(-3.0f))));
}

TEST(RouteTokensTest, GroupsOutsideTheBestAreNeverChosen) {
  MoeConfig m;
  m.n_expert = 8;
  m.n_expert_used = 2;
  m.gating = ExpertGating::kSigmoid;
  m.n_groups = 4;      // {0,1} {2,3} {4,5} {6,7}
  m.n_group_used = 1;
  // Expert 0 has the single best score, but group {6,7} has the best top-2 sum.
  const float logits[8] = {5.0f, -5.0f, 0.0f, 0.0f, 0.0f, 0.0f, 2.0f, 2.0f};
  int32_t experts[2];
  float weights[2];
  RouteTokens(m, logits, nullptr, 1, experts, weights);
  EXPECT_EQ(experts[0], 6);
  EXPECT_EQ(experts[1], 7);
}

TEST(RouteTokensTest, TiesTakeTheLowerIndexFirstAndTheSumIsClamped) {
  MoeConfig m;
  m.n_expert = 4;
  m.n_expert_used = 2;
  m.gating = ExpertGating::kSigmoid;
  m.norm_weights = true;
  const float logits[4] = {-100.0f, -100.0f, -100.0f, -100.0f};  // sigmoid ~ 3.7e-44
  int32_t experts[2];
  float weights[2];
  RouteTokens(m, logits, nullptr, 1, experts, weights);
  EXPECT_EQ(experts[0], 0);
  EXPECT_EQ(experts[1], 1);
  // The sum is clamped to 2^-14, so the weights stay tiny instead of becoming 1/2.
  EXPECT_LT(weights[0], 1e-30f);
  EXPECT_TRUE(std::isfinite(weights[0]));
}

// out = sum_i w_i down_e(silu(gate_e x) * up_e x) (+ shared), every matrix dequantized to
// float and every sum in double: the kernels' quantized activations make MoeFfn differ
// from this by a small relative error.
std::vector<double> NaiveMoe(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t n) {
  const MoeConfig& m = c.moe;
  const int64_t E = c.n_embd;
  auto matvec = [&](const WeightMatrix& mat, const std::vector<double>& in) {
    std::vector<double> out(static_cast<size_t>(mat.rows));
    std::vector<float> row(static_cast<size_t>(mat.cols));
    for (int64_t r = 0; r < mat.rows; ++r) {
      DequantizeRow(mat.type, mat.data + r * mat.row_bytes, row.data(), mat.cols);
      double s = 0;
      for (int64_t j = 0; j < mat.cols; ++j) s += row[j] * in[j];
      out[r] = s;
    }
    return out;
  };
  auto ffn = [&](const WeightMatrix& g, const WeightMatrix& u, const WeightMatrix& d,
                 const std::vector<double>& in) {
    std::vector<double> gv = matvec(g, in), uv = matvec(u, in);
    for (size_t j = 0; j < gv.size(); ++j) gv[j] = gv[j] / (1.0 + std::exp(-gv[j])) * uv[j];
    return matvec(d, gv);
  };
  std::vector<double> out(static_cast<size_t>(n * E), 0.0);
  std::vector<float> logits(static_cast<size_t>(n * m.n_expert));
  std::vector<int32_t> experts(static_cast<size_t>(n * m.n_expert_used));
  std::vector<float> weights(experts.size());
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> in(x + t * E, x + (t + 1) * E);
    const std::vector<double> lg = matvec(w.router, in);
    for (int e = 0; e < m.n_expert; ++e) logits[t * m.n_expert + e] = static_cast<float>(lg[e]);
  }
  RouteTokens(m, logits.data(), w.probs_bias.empty() ? nullptr : w.probs_bias.data(), n,
              experts.data(), weights.data());
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> in(x + t * E, x + (t + 1) * E);
    for (int i = 0; i < m.n_expert_used; ++i) {
      const int e = experts[t * m.n_expert_used + i];
      const std::vector<double> y = ffn(w.gate.At(e), w.up.At(e), w.down.At(e), in);
      for (int64_t d = 0; d < E; ++d) out[t * E + d] += weights[t * m.n_expert_used + i] * y[d];
    }
    if (w.shared_gate.valid()) {
      const std::vector<double> y = ffn(w.shared_gate, w.shared_up, w.shared_down, in);
      for (int64_t d = 0; d < E; ++d) out[t * E + d] += y[d];
    }
  }
  return out;
}

std::vector<float> Inputs(int64_t n, int64_t E, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * E));
  for (float& v : x) v = dist(rng);
  return x;
}

class MoeFfnFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(MoeFfnFixture, MatchesTheNaiveReference) {
  auto model = Model::Load(FixturePath(std::string(GetParam()) + ".gguf"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  ASSERT_TRUE(c.is_moe());
  const int il = c.moe.n_dense_lead;  // the first MoE layer
  const MoeWeights& w = (*model)->weights().layers[il].moe;
  const int64_t n = 9, E = c.n_embd;
  const std::vector<float> x = Inputs(n, E, 7);
  ThreadPool pool(2);
  MoeFfn moe(c, &pool);
  std::vector<float> out(static_cast<size_t>(n * E));
  moe.Run(w, x.data(), n, out.data());
  const std::vector<double> want = NaiveMoe(c, w, x.data(), n);
  double err = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    err += (out[i] - want[i]) * (out[i] - want[i]);
    norm += want[i] * want[i];
  }
  // Activations are quantized to 8 bits per value on the way into each GEMM.
  EXPECT_LT(std::sqrt(err / norm), 0.02) << "relative L2 error";
  EXPECT_GT(norm, 0.0);
}

TEST_P(MoeFfnFixture, BatchedEqualsAloneOnAnyThreadCount) {
  auto model = Model::Load(FixturePath(std::string(GetParam()) + ".gguf"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  const MoeWeights& w = (*model)->weights().layers[c.moe.n_dense_lead].moe;
  const int64_t n = 13, E = c.n_embd;
  const std::vector<float> x = Inputs(n, E, 9);
  MoeFfn alone_ffn(c, nullptr);
  std::vector<float> alone(static_cast<size_t>(n * E));
  for (int64_t t = 0; t < n; ++t) alone_ffn.Run(w, &x[t * E], 1, &alone[t * E]);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    MoeFfn moe(c, &pool);
    std::vector<float> batched(static_cast<size_t>(n * E));
    moe.Run(w, x.data(), n, batched.data());
    EXPECT_EQ(batched, alone) << threads << " threads";
  }
}

// Routed experts are used where the file maps them, never copied at load (a sparse model
// may be larger than memory): the q8_0 fixtures have Q5_0/Q4_0 expert tensors, the types
// the load-time repacking rewrites for every other matrix.
TEST_P(MoeFfnFixture, ExpertTensorsStayInTheMappedFile) {
  auto model = Model::Load(FixturePath(std::string(GetParam()) + ".gguf"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  const ModelWeights& w = (*model)->weights();
  int checked = 0;
  for (int il = c.moe.n_dense_lead; il < c.n_layers; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    for (auto [name, stack] : {std::pair<const char*, const MatrixStack*>{"ffn_gate_exps", &w.layers[il].moe.gate},
                               {"ffn_up_exps", &w.layers[il].moe.up},
                               {"ffn_down_exps", &w.layers[il].moe.down}}) {
      const GgufTensorInfo* t = (*model)->source().FindTensor(p + name + ".weight");
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(stack->all.data, t->data) << p << name << " (" << TraitsOf(t->type).name << ")";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Archs, MoeFfnFixture,
                         ::testing::Values("qwen3moe-q4_k_m", "qwen3moe-q8_0", "glm4moe-q4_k_m",
                                           "glm4moe-q8_0", "deepseek2-q4_k_m", "deepseek2-q8_0",
                                           "glm-dsa-q4_k_m", "glm-dsa-q8_0", "deepseek32-q4_k_m",
                                           "deepseek32-q8_0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return s;
                         });

}  // namespace
}  // namespace tandem
