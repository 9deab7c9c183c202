// Half-precision conversions: IEEE fp16 (binary16) and bfloat16 <-> fp32.
//
// The single-value conversions are bit-exact, portable scalar code (no tables, no
// intrinsics), so they give the same bits on every machine and serve as the reference
// that vectorized kernels are tested against:
//   - fp16 -> fp32 and bf16 -> fp32 are exact (every half value is an fp32 value),
//     including subnormals, signed zeros and infinities. NaNs keep their sign and
//     payload (shifted into the top of the fp32 mantissa); they are not quietened.
//   - fp32 -> fp16 and fp32 -> bf16 round to nearest, ties to even. Overflow gives
//     +-inf; values below the smallest fp16 subnormal round to +-0. A NaN input gives a
//     quiet NaN of the same sign that keeps the top payload bits (as F16C/ggml do).
// Thread safety: pure functions.
#pragma once

#include <cstdint>

namespace tandem {

// Raw storage of the two 16-bit formats. Plain integers on purpose: kernels move
// them through memory (GGUF blocks) and never do arithmetic on them directly.
using Fp16Bits = uint16_t;
using Bf16Bits = uint16_t;

float Fp16ToFp32(Fp16Bits h);
Fp16Bits Fp32ToFp16(float f);

float Bf16ToFp32(Bf16Bits h);
Bf16Bits Fp32ToBf16(float f);

// Row conversions: F16C where the CPU has it, the same bits as the scalar functions
// (except that a signalling NaN may come back quiet).
// Preconditions: src and dst hold n_elems values each and do not overlap.
void Fp16ToFp32Row(const Fp16Bits* src, float* dst, int64_t n_elems);
void Fp32ToFp16Row(const float* src, Fp16Bits* dst, int64_t n_elems);
void Bf16ToFp32Row(const Bf16Bits* src, float* dst, int64_t n_elems);
void Fp32ToBf16Row(const float* src, Bf16Bits* dst, int64_t n_elems);

}  // namespace tandem
