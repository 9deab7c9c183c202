// DumpTensors: one forward pass over a token sequence with Forward's tensor trace on,
// each traced tensor written as a NumPy .npy file, for comparing Tandem's intermediate
// values with llama.cpp's (tools/dump_llama_tensors.py writes those under the same
// names; tools/compare_tensors.py compares the two).
//
// Thread safety: reentrant (each call owns its Forward and KV store).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/kv_dtype.h"
#include "model/model.h"

namespace tandem {

class ThreadPool;

struct TensorDumpOptions {
  // Name prefixes to keep ("l_out" keeps l_out-0, l_out-1, ...); empty: every tensor.
  std::vector<std::string> prefixes;
  KvDtype kv_dtype = KvDtype::kF16;
};

// Runs `tokens` (positions 0..n-1, one batch, logits at every position) and writes
// `dir`/NAME.npy (float32, [n_rows, width]) for each traced tensor the prefixes keep, and
// `dir`/tokens.txt (the ids, comma-separated). *written (optional) gets the names in
// the order the forward pass produced them. `dir` must exist.
// Errors: InvalidArgument for no tokens, an id outside the vocabulary or prefixes that
// keep nothing; Internal when a file cannot be written.
Status DumpTensors(const Model& model, ThreadPool* pool, const std::vector<int32_t>& tokens,
                   const TensorDumpOptions& options, const std::string& dir, std::vector<std::string>* written);

// The .npy bytes of a float32 [rows, cols] array (NumPy format 1.0, C order).
std::string NpyFloat32(const float* data, int64_t rows, int64_t cols);

}  // namespace tandem
