// Scalar dot products for the less common weight types, in the same integer form as
// llama.cpp: Q4_1 / Q5_1 with Q8_1 activations, Q2_K / Q3_K / Q5_K with Q8_K. Each
// super-block is unpacked to integer values q, per-16-value scales S and mins M so that
// weight = d * S * q - dmin * M, and the block sum is exact integer arithmetic.
#include <cmath>
#include <cstring>

#include "kernels/dequant.h"
#include "kernels/half.h"
#include "kernels/quant_dot.h"
#include "kernels/quant_dot_internal.h"

namespace tandem {
namespace {

struct UnpackedK {
  int8_t q[256];
  int32_t scale[16];  // per 16 values
  int32_t min[16];    // per 16 values (0 for types without mins)
  float d = 0;
  float dmin = 0;
};

void UnpackQ2_K(const BlockQ2_K& b, UnpackedK* u) {
  for (int v = 0; v < 256; ++v) {
    const int half = v / 128, k = (v % 128) / 32, l = v % 32;
    u->q[v] = static_cast<int8_t>((b.qs[32 * half + l] >> (2 * k)) & 3);
  }
  for (int s = 0; s < 16; ++s) {
    u->scale[s] = b.scales[s] & 0x0F;
    u->min[s] = b.scales[s] >> 4;
  }
  u->d = Fp16ToFp32(b.d);
  u->dmin = Fp16ToFp32(b.dmin);
}

void UnpackQ3_K(const BlockQ3_K& b, UnpackedK* u) {
  for (int v = 0; v < 256; ++v) {
    const int half = v / 128, k = (v % 128) / 32, l = v % 32;
    const int low = (b.qs[32 * half + l] >> (2 * k)) & 3;
    const bool high_set = (b.hmask[l] >> (v / 32)) & 1;
    u->q[v] = static_cast<int8_t>(low - (high_set ? 0 : 4));
  }
  for (int s = 0; s < 16; ++s) {
    const int low = s < 8 ? (b.scales[s] & 0x0F) : (b.scales[s - 8] >> 4);
    const int high = (b.scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    u->scale[s] = (low | (high << 4)) - 32;
    u->min[s] = 0;
  }
  u->d = Fp16ToFp32(b.d);
  u->dmin = 0;
}

void UnpackQ5_K(const BlockQ5_K& b, UnpackedK* u) {
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, mn;
    ScaleMinK4(s, b.scales, &sc, &mn);
    u->scale[2 * s] = u->scale[2 * s + 1] = sc;
    u->min[2 * s] = u->min[2 * s + 1] = mn;
    const uint8_t* qs = b.qs + 32 * (s / 2);
    for (int l = 0; l < 32; ++l) {
      const int low = (s % 2 == 0) ? (qs[l] & 0x0F) : (qs[l] >> 4);
      u->q[32 * s + l] = static_cast<int8_t>(low | (((b.qh[l] >> s) & 1) << 4));
    }
  }
  u->d = Fp16ToFp32(b.d);
  u->dmin = Fp16ToFp32(b.dmin);
}

template <typename Block, void (*Unpack)(const Block&, UnpackedK*)>
float DotKGeneric(const void* w_row, const void* a_row, int64_t n_blocks) {
  const Block* w = static_cast<const Block*>(w_row);
  const BlockQ8_K* a = static_cast<const BlockQ8_K*>(a_row);
  float sum = 0;
  UnpackedK u;
  for (int64_t i = 0; i < n_blocks; ++i) {
    Block b;
    std::memcpy(&b, &w[i], sizeof(Block));
    Unpack(b, &u);
    int32_t sumi = 0, summ = 0;
    for (int s = 0; s < 16; ++s) {
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) dot += u.q[16 * s + l] * a[i].qs[16 * s + l];
      sumi += u.scale[s] * dot;
      summ += u.min[s] * a[i].bsums[s];
    }
    sum += a[i].d * u.d * static_cast<float>(sumi) - a[i].d * u.dmin * static_cast<float>(summ);
  }
  return sum;
}

// Q4_1 / Q5_1 (x = d * q + m) with Q8_1 activations: d_w * d_a * sum(q * qa) + m * s_a.
template <typename Block, bool kFiveBit>
float DotQx_1(const void* w_row, const void* a_row, int64_t n_blocks) {
  const Block* w = static_cast<const Block*>(w_row);
  const BlockQ8_1* a = static_cast<const BlockQ8_1*>(a_row);
  float sum = 0;
  for (int64_t i = 0; i < n_blocks; ++i) {
    Block b;
    std::memcpy(&b, &w[i], sizeof(Block));
    uint32_t qh = 0;
    if constexpr (kFiveBit) std::memcpy(&qh, b.qh, 4);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int lo = b.qs[j] & 0x0F, hi = b.qs[j] >> 4;
      if constexpr (kFiveBit) {
        lo |= ((qh >> j) & 1) << 4;
        hi |= ((qh >> (j + 16)) & 1) << 4;
      }
      sumi += lo * a[i].qs[j] + hi * a[i].qs[j + 16];
    }
    sum += Fp16ToFp32(b.d) * Fp16ToFp32(a[i].d) * static_cast<float>(sumi) +
           Fp16ToFp32(b.m) * Fp16ToFp32(a[i].s);
  }
  return sum;
}

}  // namespace

void QuantizeRowQ8_1(const float* x, BlockQ8_1* out, int64_t cols) {
  for (int64_t b = 0; b < cols / 32; ++b, x += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      out[b].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
      sum += out[b].qs[j];
    }
    out[b].d = Fp32ToFp16(d);
    out[b].s = Fp32ToFp16(static_cast<float>(sum) * d);
  }
}

float VecDotGeneric(TensorType type, const void* w, const void* a, int64_t cols) {
  switch (type) {
    case TensorType::kQ4_1: return DotQx_1<BlockQ4_1, false>(w, a, cols / 32);
    case TensorType::kQ5_1: return DotQx_1<BlockQ5_1, true>(w, a, cols / 32);
    case TensorType::kQ2_K: return DotKGeneric<BlockQ2_K, UnpackQ2_K>(w, a, cols / 256);
    case TensorType::kQ3_K: return DotKGeneric<BlockQ3_K, UnpackQ3_K>(w, a, cols / 256);
    case TensorType::kQ5_K: return DotKGeneric<BlockQ5_K, UnpackQ5_K>(w, a, cols / 256);
    default: return NAN;
  }
}

}  // namespace tandem
