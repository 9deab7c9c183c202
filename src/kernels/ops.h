// Element-wise and normalisation operators of the transformer forward pass (float32).
//
// All functions are pure over caller-owned buffers; shapes are in the parameter names.
// Thread safety: reentrant.
#pragma once

#include <cstdint>

namespace tandem {

// y[i] = x[i] / rms(x) * w[i] over one vector of n values (w may be null = all ones).
// In place is allowed (y == x).
void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps);

// Rotary position embedding applied in place to one head vector of `head_dim` values,
// rotating the first `rot_dims` dims. `neox`: pairs (i, i + rot_dims/2) (NEOX / HF
// style); otherwise adjacent pairs (2i, 2i+1) (original LLaMA / GGML "normal").
void Rope(float* head, int head_dim, int rot_dims, int64_t position, float freq_base,
          float freq_scale, bool neox);

// In-place softmax over n values.
void Softmax(float* x, int64_t n);

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
// y[i] += a * x[i]
void Axpy(float a, const float* x, float* y, int64_t n);

// Dot product of two fp16 vectors, accumulated in float (F16C/FMA when present).
float DotF16(const uint16_t* a, const uint16_t* b, int64_t n);
// y[i] += a * fp16_to_fp32(x[i])
void AxpyF16(float a, const uint16_t* x, float* y, int64_t n);

}  // namespace tandem
