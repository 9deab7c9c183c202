// The per-token vocabulary passes of sampling (engine/sampler.cc): the largest finite
// logit and the unnormalised probabilities exp((logit - max) / T) of a 262k vocabulary,
// AVX2 where present. The vector and scalar forms give the same bits, so a seed draws the
// same tokens on every machine this runs on.
//
// Thread safety: pure functions over caller-owned buffers.
#pragma once

#include <cstdint>

namespace tandem {

// e^x for x <= 0 within 2 ulp (0 for x < -87, below float's normal range, and for NaN):
// e^x = 2^n e^r with n = round(x / ln 2), r = x - n ln 2 (two-part ln 2), and e^r by a
// degree-7 Taylor polynomial in fused multiply-adds (|r| <= ln 2 / 2).
float ExpNonPositive(float x);

// The largest finite value of x[0, n), or -infinity if there is none.
float MaxFinite(const float* x, int64_t n);

// The index greedy decoding picks: the first i with x[i] greater than every x[j], j < i,
// that nothing after it exceeds, i.e. what `best = 0; for i in 1..n-1: if x[i] > x[best]:
// best = i` returns (NaNs are never picked, except x[0] when it is NaN). n >= 1.
int64_t ArgmaxIndex(const float* x, int64_t n);

// Sampling weights, written over x: x[i] = w = ExpNonPositive((x[i] - max) * inv_t) where
// x[i] is finite and w >= floor and w > 0; else 0. Returns their sum in double, added as
// 8 partial sums (partial j takes i with i % 8 == j, in index order) then summed
// j = 0..7; *last = the largest i with a non-zero weight (-1 if none).
// Preconditions: max >= every finite x[i]; inv_t > 0.
double SamplingWeights(float* x, int64_t n, float max, float inv_t, float floor, int64_t* last);

}  // namespace tandem
