#include "kernels/q0_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "common/logging.h"
#include "kernels/dequant.h"
#include "kernels/half.h"
#include "kernels/int8_tile_internal.h"
#include "kernels/isa.h"
#include "kernels/quant_dot_internal.h"
#include "kernels/row_runs.h"

namespace tandem {

bool HasQ0Gemm(TensorType type) { return type == TensorType::kQ8_0 || type == TensorType::kQ5_0; }

int Q0Offset(TensorType type) { return type == TensorType::kQ8_0 ? 128 : 16; }

namespace {

const bool kUseAvx2 = KernelIsaLevel() >= IsaLevel::kAvx2;

struct LlamaOrder {
  bool q8_0 = true;
  bool q5_0 = false;
};

const LlamaOrder& LlamaOrderSetting() {
  static const LlamaOrder setting = [] {
    LlamaOrder o;
    const char* v = std::getenv("TANDEM_LLAMA_ORDER");
    if (v == nullptr) return o;
    LlamaOrder parsed{false, false};
    std::string value(v), item;
    bool ok = !value.empty();
    for (size_t start = 0; ok && start <= value.size();) {
      const size_t comma = std::min(value.find(',', start), value.size());
      item = value.substr(start, comma - start);
      if (item == "q8_0") {
        parsed.q8_0 = true;
      } else if (item == "q5_0") {
        parsed.q5_0 = true;
      } else if (item != "none" || value != "none") {
        ok = false;
      }
      start = comma + 1;
    }
    if (!ok) {
      TANDEM_LOG(WARNING) << "TANDEM_LLAMA_ORDER=" << value
                          << " is not a comma-separated subset of q8_0, q5_0, or none; using q8_0";
      return o;
    }
    return parsed;
  }();
  return setting;
}

// Calls f with the type as a compile-time constant.
template <typename F>
decltype(auto) WithQ0Type(TensorType type, F&& f) {
  TANDEM_CHECK(HasQ0Gemm(type)) << "no Q0 GEMM for type " << static_cast<int>(type);
  if (type == TensorType::kQ8_0) return f(std::integral_constant<TensorType, TensorType::kQ8_0>{});
  return f(std::integral_constant<TensorType, TensorType::kQ5_0>{});
}

// Block b of a stored row: its values + offset (unsigned) and its scale.
template <TensorType kType>
__attribute__((target("avx2,fma,f16c"))) inline __m256i DecodeQ0Block(const void* w_row, int64_t b, float* d) {
  if constexpr (kType == TensorType::kQ8_0) {
    const BlockQ8_0* blk = static_cast<const BlockQ8_0*>(w_row) + b;
    *d = HalfToFloat(blk->d);
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs)),
                            _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    const BlockQ5_0* blk = static_cast<const BlockQ5_0*>(w_row) + b;
    *d = HalfToFloat(blk->d);
    return _mm256_or_si256(NibblesToBytes(blk->qs),
                           _mm256_and_si256(BytesFromBits32(blk->qh), _mm256_set1_epi8(0x10)));
  }
}

// Block b of a stored row, portably.
void DecodeQ0BlockScalar(TensorType type, const void* w_row, int64_t b, uint8_t* u, float* d) {
  int8_t v[32];
  if (type == TensorType::kQ8_0) {
    const BlockQ8_0& blk = static_cast<const BlockQ8_0*>(w_row)[b];
    std::memcpy(v, blk.qs, 32);
    *d = Fp16ToFp32(blk.d);
  } else {
    const BlockQ5_0& blk = static_cast<const BlockQ5_0*>(w_row)[b];
    UnpackQ5_0(blk, v);
    *d = Fp16ToFp32(blk.d);
  }
  const int offset = Q0Offset(type);
  for (int i = 0; i < 32; ++i) u[i] = static_cast<uint8_t>(v[i] + offset);
}

// Pair h's record of block b (see Q0Tokens: groups of kQ0GroupPairs pairs, block-major
// inside a group).
int64_t RecordIndex(int64_t n_token_pairs, int64_t n_blocks, int64_t h, int64_t b) {
  const int64_t g = h / kQ0GroupPairs;
  const int64_t pairs_in_group = std::min<int64_t>(kQ0GroupPairs, n_token_pairs - g * kQ0GroupPairs);
  return g * kQ0GroupPairs * n_blocks + b * pairs_in_group + h % kQ0GroupPairs;
}

const uint8_t* PairRecord(const Q0Tokens& a, int64_t h, int64_t b) {
  return a.data.data() + RecordIndex(a.n_token_pairs, a.n_blocks, h, b) * kQ0RecordBytes;
}

const uint8_t* Record(const Q0Tokens& a, int64_t t, int64_t b) { return PairRecord(a, t / 2, b); }

// dot(prepared row, token t) with the vector paths' float steps lane by lane (the scalar
// kernel; the tests' reference is written out separately).
float DotQ0Scalar(const uint8_t* u, const float* d, int offset, const Q0Tokens& a, int64_t t) {
  const int k = static_cast<int>(t % 2);
  float acc[8] = {};
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* rec = Record(a, t, b);
    const auto* x = reinterpret_cast<const int8_t*>(rec + 32 * k);
    float dx;
    std::memcpy(&dx, rec + 64 + 32 * k, sizeof(dx));
    const float scale = d[b] * dx;
    for (int j = 0; j < 8; ++j) {
      int32_t lane = 0;
      for (int i = 4 * j; i < 4 * j + 4; ++i) lane += (u[32 * b + i] - offset) * x[i];
      acc[j] = std::fma(scale, static_cast<float>(lane), acc[j]);
    }
  }
  float s[4];
  for (int j = 0; j < 4; ++j) s[j] = acc[j] + acc[j + 4];
  return (s[0] + s[2]) + (s[1] + s[3]);
}

// The exact lane sums of one block, 256-bit: u (weights + offset) against signed x. With
// VNNI from the record's -offset * (lane sums of x); plain AVX2 as llama.cpp (vpmaddubsw(|w|, sign(x,
// w)) + vpmaddwd, whose int16 pair sums, at most 2 * 128 * 127, never saturate).
template <TensorType kType, VnniForm kForm>
__attribute__((target("avx2,fma,f16c"))) inline __m256i LanesAvx2(__m256i u, __m256i x, const uint8_t* neg_sums) {
  if constexpr (kForm == VnniForm::kNone) {
    const __m256i w = _mm256_sub_epi8(u, _mm256_set1_epi8(static_cast<char>(Q0Offset(kType))));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)),
                             _mm256_set1_epi16(1));
  } else {
    return DpBusd<kForm>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(neg_sums)), u, x);
  }
}

// Where token t's 256-bit operands of each block are: block b's at p + b * stride (x; its
// scale at + 64, its negated lane sums at + 128), computed once per token.
struct TokenCursor {
  const uint8_t* p = nullptr;
  int64_t stride = 0;
};

TokenCursor CursorOf(const Q0Tokens& a, int64_t t) {
  return TokenCursor{Record(a, t, 0) + 32 * (t % 2), a.n_blocks > 1 ? Record(a, t, 1) - Record(a, t, 0) : 0};
}

// Token t's 256-bit operands of block b: x, its scale broadcast, and where its negated lane
// sums are.
struct TokenBlockAvx2 {
  __m256i x;
  __m256 dx;
  const uint8_t* neg_sums;
  __attribute__((target("avx2,fma,f16c"))) TokenBlockAvx2(const TokenCursor& c, int64_t b) {
    const uint8_t* rec = c.p + b * c.stride;
    x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec));
    dx = _mm256_broadcast_ss(reinterpret_cast<const float*>(rec + 64));
    neg_sums = rec + 128;
  }
};

// The tile, 256-bit: 4 prepared rows x one token at a time.
template <TensorType kType, VnniForm kForm>
__attribute__((target("avx2,fma,f16c"))) void DotQ0TileAvx2(const Q0Row w[4], const Q0Tokens& a, int h0, int n_h,
                                                           float out[4][8]) {
  for (int k = 0; k < 2 * n_h; ++k) {
    const TokenCursor cursor = CursorOf(a, 2 * h0 + k);
    __m256 acc[4];
    for (int r = 0; r < 4; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < a.n_blocks; ++b) {
      const TokenBlockAvx2 tok(cursor, b);
      for (int r = 0; r < 4; ++r) {
        const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r].u + 32 * b));
        const __m256i lanes = LanesAvx2<kType, kForm>(u, tok.x, tok.neg_sums);
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_broadcast_ss(w[r].d + b), tok.dx), _mm256_cvtepi32_ps(lanes),
                                 acc[r]);
      }
    }
    for (int r = 0; r < 4; ++r) out[r][k] = HorizontalSum(acc[r]);
  }
}

// The row path, 256-bit: kGroup tokens from t0 against one stored row, each block decoded
// once for all of them. Decode streams the weights from DRAM once; the line kPrefetchBytes
// ahead is asked for (as DotTileRowGroupAvx2 does).
template <TensorType kType, int kGroup, VnniForm kForm>
__attribute__((target("avx2,fma,f16c"))) inline void DotQ0RowGroupAvx2(const void* w_row, const Q0Tokens& a,
                                                                      int64_t t0, float* out) {
  constexpr int64_t kBlockBytes = kType == TensorType::kQ8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ5_0);
  constexpr int64_t kPrefetchBytes = 1536;
  const char* ahead = static_cast<const char*>(w_row) + kPrefetchBytes;
  __m256 acc[kGroup];
  TokenCursor cursors[kGroup];
  for (int g = 0; g < kGroup; ++g) {
    acc[g] = _mm256_setzero_ps();
    cursors[g] = CursorOf(a, t0 + g);
  }
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    _mm_prefetch(ahead + b * kBlockBytes, _MM_HINT_T0);
    float dw;
    const __m256i u = DecodeQ0Block<kType>(w_row, b, &dw);
    const __m256 dwv = _mm256_set1_ps(dw);
    for (int g = 0; g < kGroup; ++g) {
      const TokenBlockAvx2 tok(cursors[g], b);
      const __m256i lanes = LanesAvx2<kType, kForm>(u, tok.x, tok.neg_sums);
      acc[g] = _mm256_fmadd_ps(_mm256_mul_ps(dwv, tok.dx), _mm256_cvtepi32_ps(lanes), acc[g]);
    }
  }
  for (int g = 0; g < kGroup; ++g) out[g] = HorizontalSum(acc[g]);
}

template <TensorType kType, VnniForm kForm>
__attribute__((target("avx2,fma,f16c"))) void DotQ0RowsAvx2(const uint8_t* w, int64_t row_bytes, int64_t rows,
                                                           const Q0Tokens& a, float* y, int64_t y_stride) {
  const int n_tokens = a.n_tokens;
  ForEachRowInRuns(n_tokens, 0, rows, [&](int64_t r) {  // interleaved runs (row_runs.h)
    const uint8_t* row = w + r * row_bytes;
    float out[8];
    int t = 0;
    for (; t + 8 <= n_tokens; t += 8) {  // up to 8 tokens per decoded block (16 ymm registers)
      DotQ0RowGroupAvx2<kType, 8, kForm>(row, a, t, out);
      for (int g = 0; g < 8; ++g) y[(t + g) * y_stride + r] = out[g];
    }
    switch (n_tokens - t) {
#define TANDEM_Q0_GROUP_CASE(N)                          \
  case N:                                                \
    DotQ0RowGroupAvx2<kType, N, kForm>(row, a, t, out);  \
    break;
      TANDEM_Q0_GROUP_CASE(1)
      TANDEM_Q0_GROUP_CASE(2)
      TANDEM_Q0_GROUP_CASE(3)
      TANDEM_Q0_GROUP_CASE(4)
      TANDEM_Q0_GROUP_CASE(5)
      TANDEM_Q0_GROUP_CASE(6)
      TANDEM_Q0_GROUP_CASE(7)
#undef TANDEM_Q0_GROUP_CASE
      default:
        break;
    }
    for (int g = 0; t + g < n_tokens; ++g) y[(t + g) * y_stride + r] = out[g];
  });
}

// ---- AVX-512 VNNI: a token pair per zmm register, one token per 256-bit half ----

// A token pair's operands of one block, from its record: [x_t0 | x_t1], scale lanes, and
// the lanes' start.
template <TensorType kType>
struct PairBlockAvx512 {
  __m512i x, start;
  __m512 dx;
  __attribute__((target(TANDEM_AVX512_TARGET))) explicit PairBlockAvx512(const uint8_t* rec) {
    x = _mm512_loadu_si512(rec);
    dx = _mm512_loadu_ps(rec + 64);
    start = _mm512_loadu_si512(rec + 128);
  }
};

// The tile: 4 prepared rows x kPairs token pairs; each weight block is broadcast to both
// halves once for all the pairs.
template <TensorType kType, int kPairs>
__attribute__((target(TANDEM_AVX512_TARGET))) void DotQ0TileAvx512(const Q0Row w[4], const Q0Tokens& a, int h0,
                                                                   float out[4][8]) {
  __m512 acc[4][kPairs];
  for (int r = 0; r < 4; ++r)
    for (int h = 0; h < kPairs; ++h) acc[r][h] = _mm512_setzero_ps();
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    const uint8_t* recs = PairRecord(a, h0, b);  // h0 + h: kQ0RecordBytes apart (one group)
    __m512i x[kPairs], start[kPairs];
    __m512 dx[kPairs];
    for (int h = 0; h < kPairs; ++h) {
      const PairBlockAvx512<kType> p(recs + h * kQ0RecordBytes);
      x[h] = p.x;
      start[h] = p.start;
      dx[h] = p.dx;
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512i u = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r].u + 32 * b)));
      const __m512 dw = _mm512_set1_ps(w[r].d[b]);
#pragma GCC unroll 4
      for (int h = 0; h < kPairs; ++h) {
        const __m512i lanes = _mm512_dpbusd_epi32(start[h], u, x[h]);
        acc[r][h] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx[h]), _mm512_cvtepi32_ps(lanes), acc[r][h]);
      }
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int h = 0; h < kPairs; ++h) HalfSums(acc[r][h], &out[r][2 * h], &out[r][2 * h + 1]);
}

// The row path: kRows stored rows (row_bytes apart) x kPairs token pairs from h0, each block
// decoded once for all of them.
template <TensorType kType, int kRows, int kPairs>
__attribute__((target(TANDEM_AVX512_TARGET))) inline void DotQ0RowPairsAvx512(const uint8_t* w_row, int64_t row_bytes,
                                                                              const Q0Tokens& a, int h0,
                                                                              float out[][16]) {
  constexpr int64_t kBlockBytes = kType == TensorType::kQ8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ5_0);
  constexpr int64_t kPrefetchBytes = 1536;
  __m512 acc[kRows][kPairs];
  for (int r = 0; r < kRows; ++r)
    for (int h = 0; h < kPairs; ++h) acc[r][h] = _mm512_setzero_ps();
  for (int64_t b = 0; b < a.n_blocks; ++b) {
    __m512i u[kRows];
    __m512 dw[kRows];
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* row = w_row + r * row_bytes;
      _mm_prefetch(reinterpret_cast<const char*>(row) + kPrefetchBytes + b * kBlockBytes, _MM_HINT_T0);
      float d;
      u[r] = _mm512_broadcast_i64x4(DecodeQ0Block<kType>(row, b, &d));
      dw[r] = _mm512_set1_ps(d);
    }
    const uint8_t* recs = PairRecord(a, h0, b);  // h0 + h: kQ0RecordBytes apart (one group)
#pragma GCC unroll 8
    for (int h = 0; h < kPairs; ++h) {
      const PairBlockAvx512<kType> p(recs + h * kQ0RecordBytes);
      for (int r = 0; r < kRows; ++r) {
        const __m512i lanes = _mm512_dpbusd_epi32(p.start, u[r], p.x);
        acc[r][h] = _mm512_fmadd_ps(_mm512_mul_ps(dw[r], p.dx), _mm512_cvtepi32_ps(lanes), acc[r][h]);
      }
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int h = 0; h < kPairs; ++h) HalfSums(acc[r][h], &out[r][2 * h], &out[r][2 * h + 1]);
}

// kRows rows from `row` against every token, up to 16 tokens per decoded block.
template <TensorType kType, int kRows>
__attribute__((target(TANDEM_AVX512_TARGET))) void DotQ0RowBlockAvx512(const uint8_t* row, int64_t row_bytes,
                                                                       const Q0Tokens& a, float* y, int64_t y_stride) {
  constexpr int kMaxPairs = kQ0GroupPairs;  // one group per pass
  float out[kRows][16];
  for (int h0 = 0; h0 < a.n_token_pairs; h0 += kMaxPairs) {
    switch (std::min(kMaxPairs, a.n_token_pairs - h0)) {
#define TANDEM_Q0_PAIRS_CASE(N)                                                \
  case N:                                                                      \
    DotQ0RowPairsAvx512<kType, kRows, N>(row, row_bytes, a, h0, out);          \
    break;
      TANDEM_Q0_PAIRS_CASE(1)
      TANDEM_Q0_PAIRS_CASE(2)
      TANDEM_Q0_PAIRS_CASE(3)
      TANDEM_Q0_PAIRS_CASE(4)
      TANDEM_Q0_PAIRS_CASE(5)
      TANDEM_Q0_PAIRS_CASE(6)
      TANDEM_Q0_PAIRS_CASE(7)
      TANDEM_Q0_PAIRS_CASE(8)
#undef TANDEM_Q0_PAIRS_CASE
      default:
        break;
    }
    const int t0 = 2 * h0;
    for (int r = 0; r < kRows; ++r) {
      for (int k = 0; k < 16 && t0 + k < a.n_tokens; ++k) y[(t0 + k) * y_stride + r] = out[r][k];
    }
  }
}

template <TensorType kType>
__attribute__((target(TANDEM_AVX512_TARGET))) void DotQ0RowsAvx512(const uint8_t* w, int64_t row_bytes, int64_t rows,
                                                                   const Q0Tokens& a, float* y, int64_t y_stride) {
  ForEachRowInRuns(a.n_tokens, 0, rows / 2, [&](int64_t pair) {  // row pairs in interleaved runs (row_runs.h)
    DotQ0RowBlockAvx512<kType, 2>(w + 2 * pair * row_bytes, row_bytes, a, y + 2 * pair, y_stride);
  });
  if (rows % 2 != 0) DotQ0RowBlockAvx512<kType, 1>(w + (rows - 1) * row_bytes, row_bytes, a, y + rows - 1, y_stride);
}

template <TensorType kType>
__attribute__((target("avx2,fma,f16c"))) void PrepareQ0RowAvx2(const void* w_row, int64_t n_blocks, uint8_t* u,
                                                               float* d) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + 32 * b), DecodeQ0Block<kType>(w_row, b, d + b));
  }
}

}  // namespace

bool SumsInLlamaCppOrder(TensorType type) {
  if (type == TensorType::kQ8_0) return LlamaOrderSetting().q8_0;
  if (type == TensorType::kQ5_0) return LlamaOrderSetting().q5_0;
  return false;
}

std::string LlamaCppOrderTypes() {
  const LlamaOrder& o = LlamaOrderSetting();
  if (!o.q8_0 && !o.q5_0) return "none";
  return o.q8_0 && o.q5_0 ? "q8_0,q5_0" : o.q8_0 ? "q8_0" : "q5_0";
}

void PrepareQ0Row(TensorType type, const void* w_row, int64_t n_blocks, uint8_t* u, float* d) {
  if (!kUseAvx2) {
    TANDEM_CHECK(HasQ0Gemm(type)) << "no Q0 GEMM for type " << static_cast<int>(type);
    for (int64_t b = 0; b < n_blocks; ++b) DecodeQ0BlockScalar(type, w_row, b, u + 32 * b, d + b);
    return;
  }
  WithQ0Type(type, [&](auto tt) { PrepareQ0RowAvx2<decltype(tt)::value>(w_row, n_blocks, u, d); });
}

void PairQ0Tokens(TensorType type, const uint8_t* rows, int64_t row_bytes, int n_tokens, int64_t n_blocks,
                  Q0Tokens* out) {
  const int offset = Q0Offset(type);
  const int n_tp = (n_tokens + 1) / 2;
  out->n_blocks = n_blocks;
  out->n_tokens = n_tokens;
  out->n_token_pairs = n_tp;
  out->data.resize(static_cast<size_t>(n_tp * n_blocks * kQ0RecordBytes));
  for (int h = 0; h < n_tp; ++h) {
    for (int k = 0; k < 2; ++k) {
      const auto* blocks = reinterpret_cast<const BlockQ8_0*>(rows + std::min(2 * h + k, n_tokens - 1) * row_bytes);
      for (int64_t b = 0; b < n_blocks; ++b) {
        uint8_t* rec = out->data.data() + RecordIndex(n_tp, n_blocks, h, b) * kQ0RecordBytes;
        std::memcpy(rec + 32 * k, blocks[b].qs, 32);
        float lanes[8];
        std::fill(lanes, lanes + 8, Fp16ToFp32(blocks[b].d));
        std::memcpy(rec + 64 + 32 * k, lanes, sizeof(lanes));
        int32_t neg_sums[8];
        for (int j = 0; j < 8; ++j) {
          const int8_t* q = blocks[b].qs + 4 * j;
          neg_sums[j] = -offset * (q[0] + q[1] + q[2] + q[3]);
        }
        std::memcpy(rec + 128 + 32 * k, neg_sums, sizeof(neg_sums));
      }
    }
  }
}

void DotQ0Tile(TensorType type, const Q0Row w[4], const Q0Tokens& a, int h0, int n_h, float out[4][8],
               Int8Kernel kernel) {
  TANDEM_CHECK(n_h >= 1 && n_h <= 4 && h0 + n_h <= a.n_token_pairs &&
               h0 / kQ0GroupPairs == (h0 + n_h - 1) / kQ0GroupPairs)
      << "token pairs " << h0 << " + " << n_h;
  WithQ0Type(type, [&](auto tt) {
    constexpr TensorType kType = decltype(tt)::value;
    switch (kernel) {
      case Int8Kernel::kScalar:
        for (int r = 0; r < 4; ++r) {
          for (int k = 0; k < 2 * n_h; ++k) out[r][k] = DotQ0Scalar(w[r].u, w[r].d, Q0Offset(type), a, 2 * h0 + k);
        }
        return;
      case Int8Kernel::kAvx2:
        return DotQ0TileAvx2<kType, VnniForm::kNone>(w, a, h0, n_h, out);
      case Int8Kernel::kAvxVnni:
        return DotQ0TileAvx2<kType, VnniForm::kVex>(w, a, h0, n_h, out);
      case Int8Kernel::kAvx512Vnni:
        switch (n_h) {
          case 1:
            return DotQ0TileAvx512<kType, 1>(w, a, h0, out);
          case 2:
            return DotQ0TileAvx512<kType, 2>(w, a, h0, out);
          case 3:
            return DotQ0TileAvx512<kType, 3>(w, a, h0, out);
          default:
            return DotQ0TileAvx512<kType, 4>(w, a, h0, out);
        }
    }
  });
}

void DotQ0Rows(TensorType type, const uint8_t* w, int64_t row_bytes, int64_t rows, const Q0Tokens& a, float* y,
               int64_t y_stride, Int8Kernel kernel) {
  WithQ0Type(type, [&](auto tt) {
    constexpr TensorType kType = decltype(tt)::value;
    switch (kernel) {
      case Int8Kernel::kScalar: {
        thread_local std::vector<uint8_t> u;
        thread_local std::vector<float> d;
        u.resize(static_cast<size_t>(32 * a.n_blocks));
        d.resize(static_cast<size_t>(a.n_blocks));
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t b = 0; b < a.n_blocks; ++b) {
            DecodeQ0BlockScalar(type, w + r * row_bytes, b, u.data() + 32 * b, d.data() + b);
          }
          for (int t = 0; t < a.n_tokens; ++t) y[t * y_stride + r] = DotQ0Scalar(u.data(), d.data(), Q0Offset(type), a, t);
        }
        return;
      }
      case Int8Kernel::kAvx2:
        return DotQ0RowsAvx2<kType, VnniForm::kNone>(w, row_bytes, rows, a, y, y_stride);
      case Int8Kernel::kAvxVnni:
        return DotQ0RowsAvx2<kType, VnniForm::kVex>(w, row_bytes, rows, a, y, y_stride);
      case Int8Kernel::kAvx512Vnni:
        // One token: the 256-bit path with EVEX vpdpbusd (half a zmm would idle).
        if (a.n_tokens == 1) return DotQ0RowsAvx2<kType, VnniForm::kEvex>(w, row_bytes, rows, a, y, y_stride);
        return DotQ0RowsAvx512<kType>(w, row_bytes, rows, a, y, y_stride);
    }
  });
}

}  // namespace tandem
