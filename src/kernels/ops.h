// Element-wise and normalisation operators of the transformer forward pass (float32).
//
// All functions are pure over caller-owned buffers; shapes are in the parameter names.
// Thread safety: reentrant.
#pragma once

#include <cstdint>

#include "kernels/attention_rows.h"  // the attention row kernels (DotF16Rows, ...) moved there

namespace tandem {

// y[i] = x[i] / rms(x) * w[i] over one vector of n values (w may be null = all ones).
// In place is allowed (y == x).
void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps);

// Layer normalisation as ggml_norm then ggml_mul / ggml_add: y = (x - mean) /
// sqrt(var + eps) * w + b, the mean and variance summed as ggml does (double over
// 8-value partial sums). w and b may be null. In place is allowed.
void LayerNorm(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);

// Rotary position embedding applied in place to one head vector of `head_dim` values,
// rotating the first `rot_dims` dims. `neox`: pairs (i, i + rot_dims/2) (NEOX / HF
// style); otherwise adjacent pairs (2i, 2i+1) (original LLaMA / GGML "normal").
void Rope(float* head, int head_dim, int rot_dims, int64_t position, float freq_base,
          float freq_scale, bool neox);
// Rope in two steps, so that a batch computes each position's angles once for all its
// heads and layers: cos/sin of the rot_dims/2 rotation angles of `position`, then the
// rotation with them. RopeApply(RopeAngles(...)) gives exactly Rope's bits.
void RopeAngles(int rot_dims, int64_t position, float freq_base, float freq_scale, float* cos_out,
                float* sin_out);
void RopeApply(float* head, int rot_dims, const float* cos, const float* sin, bool neox);
// RopeAngles with per-pair frequency factors (Llama 3.1's rope_freqs), as ggml's rope
// cache: pair i's angle is freq_scale * (position * base^(-2i/rot_dims) / factors[i]).
void RopeAnglesFactors(int rot_dims, int64_t position, float freq_base, float freq_scale,
                       const float* factors, float* cos_out, float* sin_out);
// RopeAngles with YaRN scaling, exactly as ggml's rope_yarn + rope cache: for pair i the
// extrapolated angle p·base^(-2i/rot_dims) and its interpolation (times freq_scale) are
// mixed by a ramp that is 1 below dim corr_low and 0 above corr_high (times
// ext_factor); cos and sin are scaled by attn_factor·(1 + 0.1·ln(1/freq_scale)) when
// ext_factor != 0, by attn_factor otherwise.
void RopeAnglesYarn(int rot_dims, int64_t position, float freq_base, float freq_scale,
                    float ext_factor, float attn_factor, float corr_low, float corr_high,
                    float* cos_out, float* sin_out);

// In-place softmax over n values (the attention's): e = e^(x - max) as ggml_v_expf
// computes it on AVX2 (exp_internal.h GgmlExpf), summed as groups of 8 (each group
// in float as (e0+e4 + e2+e6) + (e1+e5 + e3+e7), the groups added in double, in order,
// as ggml_vec_soft_max_f32 does on AVX2), times 1 / sum. The last n % 8 values form a
// group padded with zeros: llama.cpp's attention rows span its KV cells padded to a
// multiple of 256, the positions past the query masked (-inf, e = 0), so its last group
// of 8 is reduced in float with them. 8 values at a time on AVX2; the scalar level gives
// the same bits.
void Softmax(float* x, int64_t n);
// exp(x - max) by libm's expf, summed in double one by one, times 1 / sum (MoE gating
// keeps it: its expert choice is what the sparse goldens measured, and a handful of
// experts costs nothing).
void SoftmaxLibm(float* x, int64_t n);

// x[i] = gelu_tanh(x[i]) * y[i]   (Gemma's GeGLU). As GGML's CPU backend does, the
// GELU input and output are rounded to fp16 (its lookup table), so results agree.
void GeluMul(float* x, const float* y, int64_t n);
// x[i] = silu(x[i]) * y[i]        (LLaMA's SwiGLU).
void SiluMul(float* x, const float* y, int64_t n);

// y[i] += x[i]
void AddInPlace(float* y, const float* x, int64_t n);
// x[i] *= s
void Scale(float* x, float s, int64_t n);

// Dot product of two float vectors (AVX2/FMA when the CPU has it).
float DotF32(const float* a, const float* b, int64_t n);
// The same dot product in exactly ggml_vec_dot_f32's order on AVX2 (four 8-lane FMA
// accumulators over 32-value steps, folded (0+2)+(1+3), lanes summed pairwise as
// hadd does, the remainder added one by one), so callers that must match llama.cpp bit
// for bit (the glm-dsa indexer's scores) can; the portable path keeps that order.
float DotF32Ggml(const float* a, const float* b, int64_t n);
// The same dot product in ggml_vec_dot_bf16's order on AVX2 (llama.cpp's BF16 x BF16 dot
// for one token and for MoE experts): four 8-lane FMA accumulators over 32-value steps,
// folded (0+2)+(1+3), ggml's 8-lane sum, then the remainder's products (rounded to float)
// added in double. For bf16 values held as floats.
float DotBf16Ggml(const float* a, const float* b, int64_t n);
// The same dot product in llamafile's tinyBLAS order (ggml's F32 x F32 matrix product
// when the other side has two or more columns): one 8-lane FMA accumulator over the
// whole length, then its lanes summed (l + l+4), (0+2) + (1+3). For n % 8 != 0
// tinyBLAS declines and ggml falls back to DotF32Ggml, as this does. (The glm-dsa
// indexer's query rotation: a token's heads are several columns.)
float DotF32Sgemm(const float* a, const float* b, int64_t n);
// The lightning indexer's scores (DeepSeek sparse attention, as ggml's fused CPU op):
// scores[j] = sum over h of max(q[h] . k_rows[j], 0) * w[h] for n fp16 key rows of hd
// values, q [n_heads, hd] and w [n_heads] in float; each dot is DotF32Ggml's, the sum
// over heads in order, multiply and add rounded apart.
void IndexerScoresF16(const float* q, const float* w, int n_heads, const uint16_t* const* k_rows, int64_t n,
                      int hd, float* scores);
// y[i] += a * x[i]
void Axpy(float a, const float* x, float* y, int64_t n);

// Dot product of two fp16 vectors, accumulated in float (F16C/FMA when present).
float DotF16(const uint16_t* a, const uint16_t* b, int64_t n);
// y[i] += a * fp16_to_fp32(x[i])
void AxpyF16(float a, const uint16_t* x, float* y, int64_t n);

}  // namespace tandem
