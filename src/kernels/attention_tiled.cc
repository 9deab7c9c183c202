#include "kernels/attention_tiled.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/half.h"
#include "kernels/ops.h"
#include "kernels/quant_dot_internal.h"

namespace tandem {
namespace {

constexpr int64_t kMaxQueryTile = 16;
constexpr int kMaxHeadBlock = 4;  // query heads that share one pass over a KV tile

// Key rows per KV tile: the widened tile takes 64 KiB of L2.
int64_t KvTileRows(int hd) { return std::clamp<int64_t>(16384 / hd, 16, 128); }

int64_t LowOf(const TiledAttentionProblem& p, int64_t pos) {
  return p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
}

// ---- scalar kernels (the reference order for the vector ones) ----

// s[h][j] = scale * dot(q[h], k[j]) for m heads and n float key rows of hd values.
void ScoresScalar(const float* const* q, int m, const float* k, int64_t n, int hd, float scale,
                  float* const* s) {
  for (int h = 0; h < m; ++h) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int d = 0; d < hd; ++d) sum += q[h][d] * k[j * hd + d];
      s[h][j] = sum * scale;
    }
  }
}

// o[h] += sum_j p[h][j] * v[j], in WeightedSumF16Rows' (scalar) order: one chain over j
// per output value, a multiply and an add.
void AccumulateScalar(const float* const* p, int m, const float* v, int64_t n, int hd,
                      float* const* o) {
  for (int h = 0; h < m; ++h) {
    for (int64_t j = 0; j < n; ++j) {
      const float pj = p[h][j];
      for (int d = 0; d < hd; ++d) o[h][d] += pj * v[j * hd + d];
    }
  }
}

// ---- AVX2 kernels ----

__attribute__((target("avx2,fma"))) inline float Hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Up to four heads against two keys per pass, as attention_rows.cc's DotRowsGroupAvx2, over
// keys already widened to float. Preconditions: hd % 8 == 0, G <= 4.
template <int G>
__attribute__((target("avx2,fma"))) void ScoresAvx2(const float* const* q, const float* k,
                                                    int64_t n, int hd, float scale,
                                                    float* const* s) {
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) {
    const float* k0p = k + j * hd;
    const float* k1p = k0p + hd;
    __m256 a0[G], a1[G];
    for (int h = 0; h < G; ++h) a0[h] = a1[h] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      const __m256 k0 = _mm256_loadu_ps(k0p + d), k1 = _mm256_loadu_ps(k1p + d);
      for (int h = 0; h < G; ++h) {
        const __m256 qv = _mm256_loadu_ps(q[h] + d);
        a0[h] = _mm256_fmadd_ps(qv, k0, a0[h]);
        a1[h] = _mm256_fmadd_ps(qv, k1, a1[h]);
      }
    }
    for (int h = 0; h < G; ++h) {
      s[h][j] = Hsum(a0[h]) * scale;
      s[h][j + 1] = Hsum(a1[h]) * scale;
    }
  }
  for (; j < n; ++j) {
    __m256 a0[G];
    for (int h = 0; h < G; ++h) a0[h] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d += 8) {
      const __m256 k0 = _mm256_loadu_ps(k + j * hd + d);
      for (int h = 0; h < G; ++h) a0[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q[h] + d), k0, a0[h]);
    }
    for (int h = 0; h < G; ++h) s[h][j] = Hsum(a0[h]) * scale;
  }
}

// A 16-wide slice of up to four heads' outputs in registers across the tile's rows, an
// 8-wide one for the rest: each output value is one fma chain over j, continued from
// the previous KV tile through `o`, as attention_rows.cc's WeightedSumRows*Avx2 run it over all
// rows. Preconditions: hd % 8 == 0, G <= 4.
// Output values from d_begin on (the avx512 kernel passes its remainder).
template <int G>
__attribute__((target("avx2,fma"))) void AccumulateAvx2(const float* const* p, const float* v,
                                                        int64_t n, int hd, float* const* o,
                                                        int d_begin = 0) {
  int d0 = d_begin;
  for (; d0 + 16 <= hd; d0 += 16) {
    __m256 acc[G][2];
    for (int h = 0; h < G; ++h) {
      acc[h][0] = _mm256_loadu_ps(o[h] + d0);
      acc[h][1] = _mm256_loadu_ps(o[h] + d0 + 8);
    }
    for (int64_t j = 0; j < n; ++j) {
      const __m256 v0 = _mm256_loadu_ps(v + j * hd + d0), v1 = _mm256_loadu_ps(v + j * hd + d0 + 8);
      for (int h = 0; h < G; ++h) {
        const __m256 pj = _mm256_set1_ps(p[h][j]);
        acc[h][0] = _mm256_fmadd_ps(pj, v0, acc[h][0]);
        acc[h][1] = _mm256_fmadd_ps(pj, v1, acc[h][1]);
      }
    }
    for (int h = 0; h < G; ++h) {
      _mm256_storeu_ps(o[h] + d0, acc[h][0]);
      _mm256_storeu_ps(o[h] + d0 + 8, acc[h][1]);
    }
  }
  for (; d0 < hd; d0 += 8) {
    __m256 acc[G];
    for (int h = 0; h < G; ++h) acc[h] = _mm256_loadu_ps(o[h] + d0);
    for (int64_t j = 0; j < n; ++j) {
      const __m256 v0 = _mm256_loadu_ps(v + j * hd + d0);
      for (int h = 0; h < G; ++h) acc[h] = _mm256_fmadd_ps(_mm256_set1_ps(p[h][j]), v0, acc[h]);
    }
    for (int h = 0; h < G; ++h) _mm256_storeu_ps(o[h] + d0, acc[h]);
  }
}

void ScoresBlockAvx2(const float* const* q, int m, const float* k, int64_t n, int hd, float scale,
                     float* const* s) {
  switch (m) {
    case 4:
      return ScoresAvx2<4>(q, k, n, hd, scale, s);
    case 3:
      return ScoresAvx2<3>(q, k, n, hd, scale, s);
    case 2:
      return ScoresAvx2<2>(q, k, n, hd, scale, s);
    default:
      return ScoresAvx2<1>(q, k, n, hd, scale, s);
  }
}

void AccumulateBlockAvx2(const float* const* p, int m, const float* v, int64_t n, int hd,
                         float* const* o) {
  switch (m) {
    case 4:
      return AccumulateAvx2<4>(p, v, n, hd, o);
    case 3:
      return AccumulateAvx2<3>(p, v, n, hd, o);
    case 2:
      return AccumulateAvx2<2>(p, v, n, hd, o);
    default:
      return AccumulateAvx2<1>(p, v, n, hd, o);
  }
}

// ---- AVX-512 kernels (the avx512 level): the AVX2 kernels' arithmetic, value by value ----
//
// Scores: two keys per register, one in each 256-bit half, each half taking the AVX2
// kernel's 8 lanes for its key (the query's 8 values broadcast to both halves), so each
// score has the AVX2 bits. The K tile is widened into a key-pair layout for it: the 8
// values 8c..8c+7 of key j at PairedKey(j, c) = (j / 2) * 2 * hd + 16 * c + 8 * (j % 2).
// Accumulate: each output value is its own fma chain over j, so a 16-wide slice per
// register keeps every chain, and so the bits, unchanged.

inline int64_t PairedKey(int64_t j, int hd, int c) { return (j / 2) * 2 * hd + 16 * c + 8 * (j % 2); }

// One key of a paired K tile: ScoresAvx2's single-key loop on its half.
template <int G>
__attribute__((target(TANDEM_AVX512_TARGET))) void ScoreOneKeyAvx512(const float* const* q,
                                                                     const float* kp, int64_t j,
                                                                     int64_t ja, int hd, float scale,
                                                                     float* const* s) {
  __m256 a[G];
  for (int h = 0; h < G; ++h) a[h] = _mm256_setzero_ps();
  for (int c = 0; c < hd / 8; ++c) {
    const __m256 k = _mm256_loadu_ps(kp + PairedKey(j, hd, c));
    for (int h = 0; h < G; ++h) a[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q[h] + 8 * c), k, a[h]);
  }
  for (int h = 0; h < G; ++h) s[h][j - ja] = Hsum(a[h]) * scale;
}

// s[h][j - ja] = scale * dot(q[h], key j) for keys [ja, jb) of a paired K tile.
// Preconditions: hd % 8 == 0, G <= 4.
template <int G>
__attribute__((target(TANDEM_AVX512_TARGET))) void ScoresAvx512(const float* const* q,
                                                                const float* kp, int64_t ja,
                                                                int64_t jb, int hd, float scale,
                                                                float* const* s) {
  const int chunks = hd / 8;
  auto single = [&](int64_t j) { ScoreOneKeyAvx512<G>(q, kp, j, ja, hd, scale, s); };
  int64_t j = ja;
  if (j < jb && j % 2 == 1) single(j++);
  for (; j + 4 <= jb; j += 4) {  // two key pairs
    __m512 a[G][2];
    for (int h = 0; h < G; ++h) a[h][0] = a[h][1] = _mm512_setzero_ps();
    const float* k0p = kp + PairedKey(j, hd, 0);
    const float* k1p = kp + PairedKey(j + 2, hd, 0);
    for (int c = 0; c < chunks; ++c) {
      const __m512 k0 = _mm512_loadu_ps(k0p + 16 * c), k1 = _mm512_loadu_ps(k1p + 16 * c);
      for (int h = 0; h < G; ++h) {
        const __m512 qv = BothHalves(_mm256_loadu_ps(q[h] + 8 * c));
        a[h][0] = _mm512_fmadd_ps(qv, k0, a[h][0]);
        a[h][1] = _mm512_fmadd_ps(qv, k1, a[h][1]);
      }
    }
    for (int h = 0; h < G; ++h) {
      float out[4];
      HalfSums(a[h][0], &out[0], &out[1]);
      HalfSums(a[h][1], &out[2], &out[3]);
      for (int k = 0; k < 4; ++k) s[h][j + k - ja] = out[k] * scale;
    }
  }
  for (; j + 2 <= jb; j += 2) {
    __m512 a[G];
    for (int h = 0; h < G; ++h) a[h] = _mm512_setzero_ps();
    const float* k0p = kp + PairedKey(j, hd, 0);
    for (int c = 0; c < chunks; ++c) {
      const __m512 k0 = _mm512_loadu_ps(k0p + 16 * c);
      for (int h = 0; h < G; ++h)
        a[h] = _mm512_fmadd_ps(BothHalves(_mm256_loadu_ps(q[h] + 8 * c)), k0, a[h]);
    }
    for (int h = 0; h < G; ++h) {
      float out[2];
      HalfSums(a[h], &out[0], &out[1]);
      s[h][j - ja] = out[0] * scale;
      s[h][j + 1 - ja] = out[1] * scale;
    }
  }
  if (j < jb) single(j);
}

// AccumulateAvx2's chains with 32 output values of each head in registers.
// Preconditions: hd % 8 == 0, G <= 4.
template <int G>
__attribute__((target(TANDEM_AVX512_TARGET))) void AccumulateAvx512(const float* const* p,
                                                                    const float* v, int64_t n,
                                                                    int hd, float* const* o) {
  int d0 = 0;
  for (; d0 + 32 <= hd; d0 += 32) {
    __m512 acc[G][2];
    for (int h = 0; h < G; ++h) {
      acc[h][0] = _mm512_loadu_ps(o[h] + d0);
      acc[h][1] = _mm512_loadu_ps(o[h] + d0 + 16);
    }
    for (int64_t j = 0; j < n; ++j) {
      const __m512 v0 = _mm512_loadu_ps(v + j * hd + d0), v1 = _mm512_loadu_ps(v + j * hd + d0 + 16);
      for (int h = 0; h < G; ++h) {
        const __m512 pj = _mm512_set1_ps(p[h][j]);
        acc[h][0] = _mm512_fmadd_ps(pj, v0, acc[h][0]);
        acc[h][1] = _mm512_fmadd_ps(pj, v1, acc[h][1]);
      }
    }
    for (int h = 0; h < G; ++h) {
      _mm512_storeu_ps(o[h] + d0, acc[h][0]);
      _mm512_storeu_ps(o[h] + d0 + 16, acc[h][1]);
    }
  }
  // The last 8..24 values: each is its own chain, so AccumulateAvx2's slices give the
  // same bits.
  if (d0 < hd) AccumulateAvx2<G>(p, v, n, hd, o, d0);
}

void ScoresBlockAvx512(const float* const* q, int m, const float* kp, int64_t ja, int64_t jb,
                       int hd, float scale, float* const* s) {
  switch (m) {
    case 4:
      return ScoresAvx512<4>(q, kp, ja, jb, hd, scale, s);
    case 3:
      return ScoresAvx512<3>(q, kp, ja, jb, hd, scale, s);
    case 2:
      return ScoresAvx512<2>(q, kp, ja, jb, hd, scale, s);
    default:
      return ScoresAvx512<1>(q, kp, ja, jb, hd, scale, s);
  }
}

void AccumulateBlockAvx512(const float* const* p, int m, const float* v, int64_t n, int hd,
                           float* const* o) {
  switch (m) {
    case 4:
      return AccumulateAvx512<4>(p, v, n, hd, o);
    case 3:
      return AccumulateAvx512<3>(p, v, n, hd, o);
    case 2:
      return AccumulateAvx512<2>(p, v, n, hd, o);
    default:
      return AccumulateAvx512<1>(p, v, n, hd, o);
  }
}

// ---- the tiling ----

struct Scratch {
  std::vector<float> kv;  // [kv_tile, hd] the KV tile's K (pass 1) or V (pass 3) rows in float
  std::vector<float> row;  // one widened key row (the avx512 level's key-pair layout)
  std::vector<float> s;   // [rows, group, span] scores, then probabilities, of each query vector
  std::vector<uint16_t> p16;
};

// The query heads of one query row in blocks of up to four: fn(first head, heads).
template <typename Fn>
void ForHeadBlocks(int group, Fn&& fn) {
  for (int h0 = 0; h0 < group; h0 += kMaxHeadBlock) fn(h0, std::min(kMaxHeadBlock, group - h0));
}

// Three passes over the query tile: (1) per KV tile, K widened once, the scores of every
// row and head; (2) per row and head, the softmax over its whole key range, rounded to
// fp16; (3) per KV tile, V widened once, the weighted sums. Each score, probability and
// output value is computed in the per-token kernels' order, so the bits are theirs.
// kLevel: 0 scalar, 1 AVX2, 2 AVX-512 (K tiles in the key-pair layout).
template <int kLevel>
void Run(const TiledAttentionProblem& p, int64_t qb, int64_t qe, int kvh) {
  constexpr bool kAvx2 = kLevel >= 1;
  const int hd = p.head_dim, group = p.n_heads / p.n_kv_heads;
  const int64_t rows = qe - qb, tk = KvTileRows(hd);
  const int64_t first_lo = LowOf(p, p.pos0 + qb), last = p.pos0 + qe - 1;
  const int64_t span = last - first_lo + 1;  // no row sees more keys
  thread_local Scratch sc;
  sc.kv.resize(static_cast<size_t>((tk + 1) / 2 * 2 * hd));  // whole key pairs
  sc.s.resize(static_cast<size_t>(rows * group * span));
  sc.p16.resize(static_cast<size_t>(span));
  const float* qh[kMaxHeadBlock];
  float* sh[kMaxHeadBlock];
  float* oh[kMaxHeadBlock];
  auto scores_of = [&](int64_t r, int h) {  // row r's scores for head h, from key lo(r)
    return &sc.s[static_cast<size_t>(((r - qb) * group + h) * span)];
  };
  auto out_of = [&](int64_t r, int h) {
    return p.out + r * p.out_stride + static_cast<int64_t>(kvh * group + h) * hd;
  };

  // Passes 1 and 3 walk the same KV tiles: fn(key range [ka, kb) of the tile that some
  // row sees, rows [ra, rb) that see part of it). Tiles outside every row's range are
  // skipped whole.
  auto for_kv_tiles = [&](auto&& fn) {
    for (int64_t j0 = first_lo; j0 <= last; j0 += tk) {
      const int64_t j1 = std::min(j0 + tk, last + 1);
      const int64_t ra = std::max(qb, j0 - p.pos0);  // rows at or past the tile's first key
      const int64_t rb =
          p.window > 0 ? std::min(qe, j1 + p.window - 1 - p.pos0) : qe;  // window start < j1
      if (ra >= rb) continue;
      fn(std::max(j0, LowOf(p, p.pos0 + ra)), std::min(j1, p.pos0 + rb), ra, rb);
    }
  };
  const int64_t head_bytes = KvHeadBytes(p.kv_dtype, hd);
  auto widen = [&](const uint8_t* const* src, int64_t ka, int64_t kb) {
    for (int64_t j = ka; j < kb; ++j)
      DecodeKvHead(p.kv_dtype, src[j - p.row0] + kvh * head_bytes, hd,
                   &sc.kv[static_cast<size_t>((j - ka) * hd)]);
  };
  const bool paired = kLevel >= 2 && hd % 8 == 0;  // keys in the key-pair layout
  auto widen_keys = [&](int64_t ka, int64_t kb) {
    if (!paired) return widen(p.k_rows, ka, kb);
    sc.row.resize(static_cast<size_t>(hd));
    for (int64_t j = ka; j < kb; ++j) {
      DecodeKvHead(p.kv_dtype, p.k_rows[j - p.row0] + kvh * head_bytes, hd, sc.row.data());
      for (int c = 0; c < hd / 8; ++c)
        std::copy_n(sc.row.data() + 8 * c, 8, &sc.kv[static_cast<size_t>(PairedKey(j - ka, hd, c))]);
    }
  };

  for_kv_tiles([&](int64_t ka, int64_t kb, int64_t ra, int64_t rb) {
    widen_keys(ka, kb);
    for (int64_t r = ra; r < rb; ++r) {
      const int64_t lo = LowOf(p, p.pos0 + r);
      const int64_t ja = std::max(ka, lo), jb = std::min(kb, p.pos0 + r + 1);
      if (ja >= jb) continue;
      const float* kt = &sc.kv[static_cast<size_t>((ja - ka) * hd)];
      ForHeadBlocks(group, [&](int h0, int m) {
        for (int h = 0; h < m; ++h) {
          qh[h] = p.q + r * p.q_stride + static_cast<int64_t>(kvh * group + h0 + h) * hd;
          sh[h] = scores_of(r, h0 + h) + (ja - lo);
        }
        if (paired)
          ScoresBlockAvx512(qh, m, sc.kv.data(), ja - ka, jb - ka, hd, p.scale, sh);
        else if (kAvx2 && hd % 8 == 0)
          ScoresBlockAvx2(qh, m, kt, jb - ja, hd, p.scale, sh);
        else
          ScoresScalar(qh, m, kt, jb - ja, hd, p.scale, sh);
      });
    }
  });
  for (int64_t r = qb; r < qe; ++r) {
    const int64_t len = p.pos0 + r - LowOf(p, p.pos0 + r) + 1;
    for (int h = 0; h < group; ++h) {
      float* s = scores_of(r, h);
      Softmax(s, len);
      Fp32ToFp16Row(s, sc.p16.data(), len);
      Fp16ToFp32Row(sc.p16.data(), s, len);
      std::fill(out_of(r, h), out_of(r, h) + hd, 0.0f);
    }
  }
  for_kv_tiles([&](int64_t ka, int64_t kb, int64_t ra, int64_t rb) {
    widen(p.v_rows, ka, kb);
    for (int64_t r = ra; r < rb; ++r) {
      const int64_t lo = LowOf(p, p.pos0 + r);
      const int64_t ja = std::max(ka, lo), jb = std::min(kb, p.pos0 + r + 1);
      if (ja >= jb) continue;
      const float* vt = &sc.kv[static_cast<size_t>((ja - ka) * hd)];
      ForHeadBlocks(group, [&](int h0, int m) {
        for (int h = 0; h < m; ++h) {
          sh[h] = scores_of(r, h0 + h) + (ja - lo);
          oh[h] = out_of(r, h0 + h);
        }
        if (kLevel >= 2 && hd % 8 == 0)
          AccumulateBlockAvx512(sh, m, vt, jb - ja, hd, oh);
        else if (kAvx2 && hd % 8 == 0)
          AccumulateBlockAvx2(sh, m, vt, jb - ja, hd, oh);
        else
          AccumulateScalar(sh, m, vt, jb - ja, hd, oh);
      });
    }
  });
}

}  // namespace

void TiledAttentionAt(IsaLevel isa, const TiledAttentionProblem& p, int64_t q_begin, int64_t q_end,
                      int kvh) {
  if (isa >= IsaLevel::kAvx512) return Run<2>(p, q_begin, q_end, kvh);
  if (isa >= IsaLevel::kAvx2) return Run<1>(p, q_begin, q_end, kvh);
  Run<0>(p, q_begin, q_end, kvh);
}

void TiledAttention(const TiledAttentionProblem& p, int64_t q_begin, int64_t q_end, int kvh) {
  static const IsaLevel isa = KernelIsaLevel();
  TiledAttentionAt(isa, p, q_begin, q_end, kvh);
}

int64_t TiledAttentionQueryTile(int64_t n_q, int n_kv_heads, int threads) {
  int64_t tile = kMaxQueryTile;
  while (tile > 4 && (n_q + tile - 1) / tile * n_kv_heads < 4 * static_cast<int64_t>(threads))
    tile /= 2;
  return tile;
}

int64_t TiledAttentionCost(const TiledAttentionProblem& p, int64_t q_begin, int64_t q_end) {
  int64_t cost = 0;
  for (int64_t r = q_begin; r < q_end; ++r) cost += p.pos0 + r - LowOf(p, p.pos0 + r) + 1;
  return cost;
}

}  // namespace tandem
