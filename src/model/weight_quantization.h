// WeightQuantization: what `--quantization` asks of the weights at load, and the
// re-quantization of float weight matrices to Q8_0 that `w8a8` performs; and the
// lossless load-time repacking of Q5_0 / Q4_0 matrices for the int8 tile.
//
// With kW8A8 every weight matrix stored as F16, BF16 or F32 is rewritten as Q8_0 (32
// int8 values + one fp16 scale per block, ggml's reference rounding), so MatMul runs it
// on the int8 W8A8 path (Q8_0 activations, integer dots) and reads ~1.9x fewer bytes
// than F16 (~3.8x fewer than F32). Already-quantized matrices and the 1-D tensors (norms,
// biases) stay as they are; so does a float matrix whose rows are not a multiple of 32
// values (Q8_0's block), which the report names.
//
// Thread safety: pure functions; RequantizeToQ8_0 writes only its arguments (and uses
// `pool`, one ParallelFor at a time, as ThreadPool requires).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/model_weights.h"

namespace tandem {

class ThreadPool;

enum class WeightQuantization {
  kAsStored,  // no flag, or "ascend" (the vLLM-Ascend value): matrices in their file types
  kW8A8,      // "w8a8": F16/BF16/F32 matrices re-quantized to Q8_0 at load
};

// The values `--quantization` accepts, for help and error text: "w8a8, ascend".
inline constexpr const char* kAcceptedQuantizations = "w8a8, ascend";

// "w8a8" -> kW8A8; "ascend" or "" (flag absent) -> kAsStored. InvalidArgument naming
// the accepted values for anything else.
StatusOr<WeightQuantization> ParseWeightQuantization(std::string_view value);

// What RequantizeToQ8_0 did, for the load log line.
struct RequantizeReport {
  int matrices = 0;                  // distinct matrices rewritten as Q8_0
  int64_t bytes_before = 0;          // their size in the file's types
  int64_t bytes_after = 0;           // their size as Q8_0
  std::vector<std::string> skipped;  // float matrices left as stored: cols % 32 != 0
};

// Rewrites every F16/BF16/F32 matrix of `weights` whose cols are a multiple of 32 as
// Q8_0: each row is dequantized to float and quantized with QuantizeRowQ8_0 (bit-exact
// with ggml's quantize_row_q8_0_ref). The Q8_0 bytes go to *storage (its contents
// replaced), and the rewritten WeightMatrix entries point into its buffer: the caller
// owns it and must neither resize nor destroy it while `weights` is in use. A matrix
// shared by two entries (a tied LM head) is converted once and both entries point at
// the copy. Rows are converted in parallel on `pool` if not null.
RequantizeReport RequantizeToQ8_0(ModelWeights* weights, std::vector<uint8_t>* storage,
                                  ThreadPool* pool = nullptr);

// What RepackForInt8Tile did, for the load log line.
struct RepackReport {
  int matrices = 0;   // distinct matrices rewritten in a repacked layout
  int64_t bytes = 0;  // their size (the same before and after)
};

// Rewrites every Q5_0 / Q4_0 matrix of `weights` whose cols are a multiple of 64 in the
// int8 tile's load-time layout (Q5_0x2 / Q4_0x2, RepackRowForTile in kernels/int8_tile.h):
// the same values and scales, so every product and sum is unchanged (same bits), but
// decode and prefill skip the per-use nibble shuffles. Storage, sharing (a tied matrix is
// rewritten once) and `pool` as for RequantizeToQ8_0. Routed-expert tensors (*_exps) are
// left in the mapped file, so a sparse model larger than memory still loads.
RepackReport RepackForInt8Tile(ModelWeights* weights, std::vector<uint8_t>* storage,
                               ThreadPool* pool = nullptr);

}  // namespace tandem
