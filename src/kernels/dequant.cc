#include "kernels/dequant.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/logging.h"
#include "kernels/half.h"
#include "kernels/int8_tile.h"
#include "kernels/quant_dot_internal.h"

namespace tandem {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF block layouts are little-endian; a big-endian host needs byte swaps");

// Copies block i out of the (possibly unaligned) byte stream: memcpy keeps the reads
// free of alignment and strict-aliasing assumptions; compilers turn it into loads.
template <typename Block>
Block LoadBlock(const void* src, int64_t i) {
  Block block;
  std::memcpy(&block, static_cast<const uint8_t*>(src) + i * sizeof(Block), sizeof(Block));
  return block;
}

// Every value below is computed as ggml's reference does, operation by operation,
// so results are bit-identical (e.g. d * sc is rounded to float before multiplying by q).

void DequantizeQ4_0(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQk) {
    const BlockQ4_0 b = LoadBlock<BlockQ4_0>(src, i);
    const float d = Fp16ToFp32(b.d);
    for (int j = 0; j < kQk / 2; ++j) {
      dst[j] = static_cast<float>((b.qs[j] & 0x0F) - 8) * d;
      dst[j + kQk / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
}

void DequantizeQ4_1(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQk) {
    const BlockQ4_1 b = LoadBlock<BlockQ4_1>(src, i);
    const float d = Fp16ToFp32(b.d);
    const float m = Fp16ToFp32(b.m);
    for (int j = 0; j < kQk / 2; ++j) {
      dst[j] = static_cast<float>(b.qs[j] & 0x0F) * d + m;
      dst[j + kQk / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
}

uint32_t LoadU32(const uint8_t bytes[4]) {
  uint32_t v;
  std::memcpy(&v, bytes, sizeof(v));
  return v;
}

void DequantizeQ5_0(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQk) {
    const BlockQ5_0 b = LoadBlock<BlockQ5_0>(src, i);
    const float d = Fp16ToFp32(b.d);
    const uint32_t qh = LoadU32(b.qh);
    for (int j = 0; j < kQk / 2; ++j) {
      const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      dst[j] = static_cast<float>(((b.qs[j] & 0x0F) | hi0) - 16) * d;
      dst[j + kQk / 2] = static_cast<float>(((b.qs[j] >> 4) | hi1) - 16) * d;
    }
  }
}

void DequantizeQ5_1(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQk) {
    const BlockQ5_1 b = LoadBlock<BlockQ5_1>(src, i);
    const float d = Fp16ToFp32(b.d);
    const float m = Fp16ToFp32(b.m);
    const uint32_t qh = LoadU32(b.qh);
    for (int j = 0; j < kQk / 2; ++j) {
      const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      dst[j] = static_cast<float>((b.qs[j] & 0x0F) | hi0) * d + m;
      dst[j + kQk / 2] = static_cast<float>((b.qs[j] >> 4) | hi1) * d + m;
    }
  }
}

void DequantizeQ8_0(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQk) {
    const BlockQ8_0 b = LoadBlock<BlockQ8_0>(src, i);
    const float d = Fp16ToFp32(b.d);
    for (int j = 0; j < kQk; ++j) dst[j] = static_cast<float>(b.qs[j]) * d;
  }
}

void DequantizeQ2_K(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQkK) {
    const BlockQ2_K b = LoadBlock<BlockQ2_K>(src, i);
    const float d = Fp16ToFp32(b.d);
    const float dmin = Fp16ToFp32(b.dmin);
    for (int v = 0; v < kQkK; ++v) {
      const int half = v / 128;      // which 32 bytes of qs
      const int k = (v % 128) / 32;  // which 2-bit field of the byte
      const int l = v % 32;
      const uint8_t sc = b.scales[v / 16];
      const float dl = d * static_cast<float>(sc & 0x0F);
      const float ml = dmin * static_cast<float>(sc >> 4);
      const int q = (b.qs[32 * half + l] >> (2 * k)) & 3;
      dst[v] = dl * static_cast<float>(q) - ml;
    }
  }
}

// 6-bit scale s (0..15) of a Q3_K block, still biased by 32.
int Q3KScale(const uint8_t scales[12], int s) {
  const int lo = s < 8 ? (scales[s] & 0x0F) : (scales[s - 8] >> 4);
  const int hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return lo | (hi << 4);
}

void DequantizeQ3_K(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQkK) {
    const BlockQ3_K b = LoadBlock<BlockQ3_K>(src, i);
    const float d = Fp16ToFp32(b.d);
    for (int v = 0; v < kQkK; ++v) {
      const int half = v / 128;
      const int k = (v % 128) / 32;
      const int l = v % 32;
      const float dl = d * static_cast<float>(Q3KScale(b.scales, v / 16) - 32);
      const int low = (b.qs[32 * half + l] >> (2 * k)) & 3;
      // The high bit is stored inverted: a clear bit subtracts 4.
      const bool high_set = (b.hmask[l] >> (v / 32)) & 1;
      dst[v] = dl * static_cast<float>(low - (high_set ? 0 : 4));
    }
  }
}

void DequantizeQ4_K(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQkK) {
    const BlockQ4_K b = LoadBlock<BlockQ4_K>(src, i);
    const float d = Fp16ToFp32(b.d);
    const float dmin = Fp16ToFp32(b.dmin);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, mn;
      ScaleMinK4(s, b.scales, &sc, &mn);
      const float ds = d * static_cast<float>(sc);
      const float ms = dmin * static_cast<float>(mn);
      const uint8_t* qs = b.qs + 32 * (s / 2);
      for (int l = 0; l < 32; ++l) {
        const int q = (s % 2 == 0) ? (qs[l] & 0x0F) : (qs[l] >> 4);
        dst[32 * s + l] = ds * static_cast<float>(q) - ms;
      }
    }
  }
}

void DequantizeQ5_K(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQkK) {
    const BlockQ5_K b = LoadBlock<BlockQ5_K>(src, i);
    const float d = Fp16ToFp32(b.d);
    const float dmin = Fp16ToFp32(b.dmin);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, mn;
      ScaleMinK4(s, b.scales, &sc, &mn);
      const float ds = d * static_cast<float>(sc);
      const float ms = dmin * static_cast<float>(mn);
      const uint8_t* qs = b.qs + 32 * (s / 2);
      for (int l = 0; l < 32; ++l) {
        const int low = (s % 2 == 0) ? (qs[l] & 0x0F) : (qs[l] >> 4);
        const int high = ((b.qh[l] >> s) & 1) << 4;
        dst[32 * s + l] = ds * static_cast<float>(low | high) - ms;
      }
    }
  }
}

void DequantizeQ6_K(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i, dst += kQkK) {
    const BlockQ6_K b = LoadBlock<BlockQ6_K>(src, i);
    const float d = Fp16ToFp32(b.d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b.ql + 64 * half;
      const uint8_t* qh = b.qh + 32 * half;
      const int8_t* sc = b.scales + 8 * half;
      float* y = dst + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace

bool CanDequantize(TensorType type) {
  switch (type) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ8_0:
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kQ5_0x2:
    case TensorType::kQ4_0x2:
      return true;
    default:
      return false;
  }
}

void DequantizeRow(TensorType type, const void* src, float* dst, int64_t n_elems) {
  TANDEM_CHECK(CanDequantize(type)) << "no dequantizer for type " << static_cast<uint32_t>(type);
  const TensorTypeTraits traits = TraitsOf(type);
  TANDEM_CHECK(n_elems >= 0 && n_elems % traits.block_elems == 0)
      << traits.name << ": " << n_elems << " is not a multiple of " << traits.block_elems;
  const int64_t n_blocks = n_elems / traits.block_elems;
  switch (type) {
    case TensorType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n_elems) * sizeof(float));
      return;
    case TensorType::kF16:
    case TensorType::kBF16: {
      if (reinterpret_cast<uintptr_t>(src) % alignof(uint16_t) == 0) {
        // Tensor data in a GGUF file is aligned: the row converters (F16C for fp16).
        const auto* halves = static_cast<const uint16_t*>(src);
        if (type == TensorType::kF16) return Fp16ToFp32Row(halves, dst, n_elems);
        return Bf16ToFp32Row(halves, dst, n_elems);
      }
      const auto* bytes = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n_elems; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, sizeof(h));
        dst[i] = type == TensorType::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
      }
      return;
    }
    case TensorType::kQ4_0:
      return DequantizeQ4_0(src, dst, n_blocks);
    case TensorType::kQ4_1:
      return DequantizeQ4_1(src, dst, n_blocks);
    case TensorType::kQ5_0:
      return DequantizeQ5_0(src, dst, n_blocks);
    case TensorType::kQ5_1:
      return DequantizeQ5_1(src, dst, n_blocks);
    case TensorType::kQ8_0:
      return DequantizeQ8_0(src, dst, n_blocks);
    case TensorType::kQ2_K:
      return DequantizeQ2_K(src, dst, n_blocks);
    case TensorType::kQ3_K:
      return DequantizeQ3_K(src, dst, n_blocks);
    case TensorType::kQ4_K:
      return DequantizeQ4_K(src, dst, n_blocks);
    case TensorType::kQ5_K:
      return DequantizeQ5_K(src, dst, n_blocks);
    case TensorType::kQ6_K:
      return DequantizeQ6_K(src, dst, n_blocks);
    case TensorType::kQ5_0x2:
    case TensorType::kQ4_0x2:
      return DequantizeRepackedRow(type, src, dst, n_elems);
    default:
      break;
  }
  TANDEM_CHECK(false) << "unreachable";
}

void QuantizeRowQ8_0(const float* src, void* dst, int64_t n_elems) {
  TANDEM_CHECK(n_elems >= 0 && n_elems % kQk == 0)
      << "Q8_0: " << n_elems << " is not a multiple of " << kQk;
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n_elems / kQk; ++i, src += kQk, out += sizeof(BlockQ8_0)) {
    // std::max instead of std::fmax and the rounding below instead of std::round: the
    // same results (fmax also skips a NaN x; |v| <= ~127 here), without a libm call
    // per value, which made re-quantizing a model at load (--quantization w8a8) 3x slower.
    float amax = 0.0f;
    for (int j = 0; j < kQk; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 b;
    b.d = Fp32ToFp16(d);
    for (int j = 0; j < kQk; ++j) {
      // Round half away from zero, as ggml's roundf: v - trunc(v) is exact for |v| < 2^23
      // (and this equals std::round for every float with |v| <= 130, checked exhaustively).
      const float v = src[j] * id;
      int q = static_cast<int>(v);
      const float frac = v - static_cast<float>(q);
      q += (frac >= 0.5f) - (frac <= -0.5f);
      b.qs[j] = static_cast<int8_t>(q);
    }
    std::memcpy(out, &b, sizeof(b));
  }
}

}  // namespace tandem
