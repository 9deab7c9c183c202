// The Q8_0 block quantizer of activations that QuantizeActivations(kQ8_0) (quant_dot.cc)
// and the int8 tile's activation rows (PrepareTileActivationRow, int8_tile.h) share, so
// the two give the same int8 values and scales.
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>

namespace tandem {

// Quantizes 32 activations x[32] to int8 q[32] the way QuantizeActivations(kQ8_0) does:
// amax = max |x|, q = round-half-even(x * 127 / amax) (0 where amax is 0); returns amax
// (the block's scale is fp16(amax / 127)). The AVX2 form where KernelIsaLevel() has
// AVX2, else the scalar one; both give the same bytes.
float QuantizeBlockQ8_0(const float* x, int8_t* q);

}  // namespace tandem
