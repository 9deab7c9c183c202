// TiledAttention against a naive double-precision attention over the same keys and
// values (every KV cache dtype: fp16, bf16, fp8 e4m3 / e5m2, the reference reading the
// decoded values), on both ISA paths, and against the per-token kernels
// (attention_rows.h) bit for bit: GQA
// groups of 1 to 6 heads, causal chunks from position 0 and over a cached prefix,
// sliding windows narrower and wider than a KV tile, chunk lengths and head sizes that
// are not multiples of the tile sizes.
//
// Stated tolerance against the double reference: |tiled - reference| <= 5e-4 * max|v|.
// The probabilities are rounded to fp16 (relative error <= 2^-11 each, so at most
// 4.9e-4 of max|v| over a row, as they sum to 1), the rest is float rounding. (The fp16
// cases stay under 3e-4; bf16 and fp8 rows reach 3.2e-4 on these fixtures.)
#include "kernels/attention_tiled.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "kernels/half.h"
#include "kernels/ops.h"

namespace tandem {
namespace {

struct Case {
  int n_heads, n_kv_heads, head_dim;
  int64_t pos0, n_q, window;
  float scale;
};

class Fixture {
 public:
  explicit Fixture(const Case& c, KvDtype dtype = KvDtype::kF16) : c_(c), dtype_(dtype) {
    std::mt19937 rng(static_cast<uint32_t>(c.pos0 * 131 + c.n_q * 7 + c.head_dim));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t end = c.pos0 + c.n_q;
    row0_ = c.window > 0 ? std::max<int64_t>(0, c.pos0 - c.window + 1) : 0;
    const int kv_dim = c.n_kv_heads * c.head_dim;
    const int64_t row_bytes = KvRowBytes(dtype, kv_dim, c.head_dim);
    std::vector<float> kf(kv_dim), vf(kv_dim);
    // One allocation per row, like a paged cache's scattered rows.
    for (int64_t j = row0_; j < end; ++j) {
      auto k = std::make_unique<uint8_t[]>(row_bytes);
      auto v = std::make_unique<uint8_t[]>(row_bytes);
      for (int d = 0; d < kv_dim; ++d) {
        kf[d] = u(rng);
        vf[d] = u(rng);
      }
      EncodeKvRow(dtype, kf.data(), kv_dim, c.head_dim, k.get());
      EncodeKvRow(dtype, vf.data(), kv_dim, c.head_dim, v.get());
      k_ptrs_.push_back(k.get());
      v_ptrs_.push_back(v.get());
      k_store_.push_back(std::move(k));
      v_store_.push_back(std::move(v));
    }
    const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
    q_.resize(static_cast<size_t>(c.n_q * q_dim));
    for (float& x : q_) x = Fp16ToFp32(Fp32ToFp16(u(rng)));
  }

  TiledAttentionProblem Problem(float* out) const {
    TiledAttentionProblem p;
    p.q = q_.data();
    p.q_stride = static_cast<int64_t>(c_.n_heads) * c_.head_dim;
    p.out = out;
    p.out_stride = p.q_stride;
    p.n_q = c_.n_q;
    p.pos0 = c_.pos0;
    p.k_rows = k_ptrs_.data();
    p.v_rows = v_ptrs_.data();
    p.row0 = row0_;
    p.window = c_.window;
    p.n_heads = c_.n_heads;
    p.n_kv_heads = c_.n_kv_heads;
    p.head_dim = c_.head_dim;
    p.scale = c_.scale;
    p.kv_dtype = dtype_;
    return p;
  }

  // softmax(scale q.k) v in double for every (query, head).
  std::vector<double> Reference() const {
    const int hd = c_.head_dim, group = c_.n_heads / c_.n_kv_heads;
    const int64_t q_dim = static_cast<int64_t>(c_.n_heads) * hd;
    std::vector<double> out(static_cast<size_t>(c_.n_q * q_dim));
    std::vector<double> s;
    for (int64_t i = 0; i < c_.n_q; ++i) {
      const int64_t pos = c_.pos0 + i;
      const int64_t lo = c_.window > 0 ? std::max<int64_t>(0, pos - c_.window + 1) : 0;
      for (int h = 0; h < c_.n_heads; ++h) {
        const int kvh = h / group;
        const float* q = &q_[static_cast<size_t>(i * q_dim + h * hd)];
        s.assign(static_cast<size_t>(pos - lo + 1), 0.0);
        double mx = -1e300, sum = 0.0;
        for (int64_t j = lo; j <= pos; ++j) {
          const std::vector<float> k = Head(k_ptrs_[j - row0_], kvh);
          double dot = 0.0;
          for (int d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * k[d];
          s[j - lo] = dot * c_.scale;
          mx = std::max(mx, s[j - lo]);
        }
        for (double& x : s) sum += (x = std::exp(x - mx));
        double* o = &out[static_cast<size_t>(i * q_dim + h * hd)];
        for (int64_t j = lo; j <= pos; ++j) {
          const std::vector<float> v = Head(v_ptrs_[j - row0_], kvh);
          for (int d = 0; d < hd; ++d) o[d] += s[j - lo] / sum * v[d];
        }
      }
    }
    return out;
  }

  size_t out_size() const { return q_.size(); }

 private:
  // Head kvh of a row, decoded by the scalar reference.
  std::vector<float> Head(const uint8_t* row, int kvh) const {
    std::vector<float> x(static_cast<size_t>(c_.head_dim));
    DecodeKvHeadScalar(dtype_, row + kvh * KvHeadBytes(dtype_, c_.head_dim), c_.head_dim, x.data());
    return x;
  }

  Case c_;
  KvDtype dtype_;
  int64_t row0_ = 0;
  std::vector<std::unique_ptr<uint8_t[]>> k_store_, v_store_;
  std::vector<const uint8_t*> k_ptrs_, v_ptrs_;
  std::vector<float> q_;
};

// Outputs of every (query tile of `tile` rows, KV head) task at `isa`.
std::vector<float> RunTiled(const Fixture& f, const Case& c, IsaLevel isa, int64_t tile) {
  std::vector<float> out(f.out_size(), NAN);
  const TiledAttentionProblem p = f.Problem(out.data());
  for (int64_t q0 = 0; q0 < c.n_q; q0 += tile) {
    for (int kvh = 0; kvh < c.n_kv_heads; ++kvh)
      TiledAttentionAt(isa, p, q0, std::min(c.n_q, q0 + tile), kvh);
  }
  return out;
}

const Case kCases[] = {
    {8, 2, 64, 0, 100, 0, 0.5f},        // causal from position 0, group 4
    {4, 1, 256, 300, 77, 128, 0.25f},   // gemma3-like: a prefix, a window wider than a row's chunk
    {6, 3, 40, 50, 33, 0, 0.3f},        // head_dim 40: AVX2 sums in 16- and 8-wide slices
    {4, 2, 20, 12, 30, 0, 0.3f},        // head_dim not a multiple of 8: the scalar code on both
    {12, 2, 128, 1000, 45, 700, 0.2f},  // group 6 (blocks of 4 + 2), window start inside a KV tile
    {2, 2, 32, 20, 70, 5, 2.0f},        // no GQA, a window of 5 keys, sharp softmax (large scores)
    {4, 2, 96, 2500, 19, 0, 4.0f},      // a long prefix: many KV tiles, a sharp softmax
};

const KvDtype kDtypes[] = {KvDtype::kF16, KvDtype::kBf16, KvDtype::kFp8E4M3, KvDtype::kFp8E5M2};

TEST(TiledAttentionTest, MatchesDoublePrecisionReference) {
  std::vector<IsaLevel> levels{IsaLevel::kScalar};
  if (KernelIsaLevel() >= IsaLevel::kAvx2) levels.push_back(IsaLevel::kAvx2);
  if (KernelIsaLevel() >= IsaLevel::kAvx512) levels.push_back(IsaLevel::kAvx512);
  for (const Case& c : kCases) {
    for (KvDtype dtype : kDtypes) {
      const Fixture f(c, dtype);
      const std::vector<double> want = f.Reference();
      for (IsaLevel isa : levels) {
        for (int64_t tile : {int64_t{1}, int64_t{7}, int64_t{32}}) {
          SCOPED_TRACE(::testing::Message()
                       << IsaLevelName(isa) << " " << KvDtypeName(dtype) << " hd " << c.head_dim
                       << " pos0 " << c.pos0 << " window " << c.window << " tile " << tile);
          const std::vector<float> got = RunTiled(f, c, isa, tile);
          double worst = 0.0;
          for (size_t i = 0; i < want.size(); ++i)
            worst = std::max(worst, std::abs(got[i] - want[i]));
          EXPECT_LE(worst, 5e-4);  // values are in [-1, 1]: max|v| <= 1
        }
      }
    }
  }
}

// How queries are grouped into tiles (which follows the thread count) never changes a bit.
TEST(TiledAttentionTest, QueryTilingDoesNotChangeBits) {
  for (const Case& c : kCases) {
    const Fixture f(c);
    const IsaLevel isa = KernelIsaLevel();
    const std::vector<float> one = RunTiled(f, c, isa, 1);
    EXPECT_EQ(RunTiled(f, c, isa, 5), one) << "hd " << c.head_dim;
    EXPECT_EQ(RunTiled(f, c, isa, 32), one) << "hd " << c.head_dim;
  }
}

// The per-token path of forward_attention.cc: per (query, head) DotKvRowsGroup over the
// key range, Softmax, the probabilities through fp16, WeightedSumKvRowsGroup (one head
// each; the group kernels give every head the one-head bits, ops_test).
std::vector<float> PerToken(const Fixture& f, const Case& c) {
  std::vector<float> out(f.out_size(), NAN);
  const TiledAttentionProblem p = f.Problem(out.data());
  const int hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  for (int64_t i = 0; i < c.n_q; ++i) {
    const int64_t pos = c.pos0 + i;
    const int64_t lo = c.window > 0 ? std::max<int64_t>(0, pos - c.window + 1) : 0;
    for (int h = 0; h < c.n_heads; ++h) {
      const int kvh = h / group;
      const int64_t head_bytes = KvHeadBytes(p.kv_dtype, hd);
      std::vector<const uint8_t*> k, v;
      for (int64_t j = lo; j <= pos; ++j) {
        k.push_back(p.k_rows[j - p.row0] + kvh * head_bytes);
        v.push_back(p.v_rows[j - p.row0] + kvh * head_bytes);
      }
      const int64_t len = pos - lo + 1;
      std::vector<float> s(static_cast<size_t>(len));
      std::vector<uint16_t> s16(static_cast<size_t>(len));
      const float* q = p.q + i * p.q_stride + h * hd;
      float* sp = s.data();
      float* o = out.data() + i * p.out_stride + h * hd;
      DotKvRowsGroup(p.kv_dtype, &q, 1, k.data(), len, hd, c.scale, &sp);
      Softmax(s.data(), len);
      Fp32ToFp16Row(s.data(), s16.data(), len);
      Fp16ToFp32Row(s16.data(), s.data(), len);
      const float* pp = s.data();
      WeightedSumKvRowsGroup(p.kv_dtype, &pp, 1, v.data(), len, hd, &o);
    }
  }
  return out;
}

// At the process's ISA level (ctest runs this binary at the machine's level and again with
// TANDEM_ISA=avx2 and TANDEM_ISA=scalar) the tiled kernel gives the per-token kernels' bits
// (at avx512 its key-pair scores and 16-wide accumulation against the AVX2 row kernels).
TEST(TiledAttentionTest, SameBitsAsThePerTokenKernels) {
  for (const Case& c : kCases) {
    for (KvDtype dtype : kDtypes) {
      const Fixture f(c, dtype);
      EXPECT_EQ(RunTiled(f, c, KernelIsaLevel(), 16), PerToken(f, c))
          << KvDtypeName(dtype) << " hd " << c.head_dim << " pos0 " << c.pos0;
    }
  }
}

TEST(TiledAttentionTest, QueryTileLeavesFourTasksPerThread) {
  EXPECT_EQ(TiledAttentionQueryTile(512, 1, 2), 16);  // 32 tiles >= 8 tasks
  EXPECT_EQ(TiledAttentionQueryTile(64, 1, 2), 8);    // 8 tiles of 8
  EXPECT_EQ(TiledAttentionQueryTile(8, 1, 16), 4);    // never below 4 rows
  EXPECT_EQ(TiledAttentionQueryTile(64, 8, 2), 16);   // heads supply the tasks
}

TEST(TiledAttentionTest, CostCountsTheKeysEachRowSees) {
  const Fixture f({4, 1, 64, 10, 6, 3, 1.0f});
  std::vector<float> out(f.out_size());
  const TiledAttentionProblem p = f.Problem(out.data());
  EXPECT_EQ(TiledAttentionCost(p, 0, 6), 18);  // every row sees its window of 3
  TiledAttentionProblem full = p;
  full.window = 0;
  EXPECT_EQ(TiledAttentionCost(full, 0, 2), 11 + 12);
}

}  // namespace
}  // namespace tandem
