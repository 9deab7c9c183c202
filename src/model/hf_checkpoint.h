// HfCheckpoint: a Hugging Face checkpoint directory (config.json, one `*.safetensors`
// file or the shards a `*.safetensors.index.json` lists) read as a ModelSource: the
// config translated to the GGUF keys the architecture loaders read, and every tensor
// under its GGUF name and layout, as llama.cpp's convert_hf_to_gguf.py would write it.
//
// Tensors whose stored layout the kernels take (F32 / F16 / BF16 matrices, norms and
// biases) are used in place in the shards' mappings: nothing is read at open, pages come
// in on use. The transforms the converter applies are done at open into buffers the
// checkpoint owns, and LoadReport lists them: llama's q/k row permutation (HF rotates
// half-and-half, GGUF's llama RoPE adjacent pairs), Gemma's norm + 1, per-expert
// matrices stacked into one 3-D tensor, MLA's kv_b_proj split into k_b (transposed per
// head) and v_b, the router (and the DSA indexer's head weights) widened to F32.
//
// Architectures (config.json `architectures[0]`): LlamaForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM, Gemma3ForCausalLM, Qwen3MoeForCausalLM, Glm4MoeForCausalLM,
// DeepseekV2ForCausalLM, DeepseekV3ForCausalLM, DeepseekV32ForCausalLM,
// GlmMoeDsaForCausalLM. NextN (MTP) layers are kept as GGUF's trailing nextn blocks.
//
// Ownership: owns the shard mappings and the converted buffers.
// Thread safety: immutable after Open.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/matmul.h"
#include "model/model_source.h"
#include "model/safetensors_file.h"

namespace tandem {

// True when `path` is a directory holding config.json (a Hugging Face checkpoint).
bool IsHfCheckpointDir(const std::string& path);

class HfCheckpoint : public ModelSource {
 public:
  // Reads config.json, the index and the shards' headers under `dir`. Errors name the
  // file, the tensor or the config key: NotFound for a missing config.json / shard /
  // tensor, InvalidArgument for a key of the wrong type or a tensor of the wrong shape,
  // Unimplemented for an architecture or quantization scheme Tandem does not run.
  static StatusOr<std::unique_ptr<HfCheckpoint>> Open(const std::string& dir);

  // The checkpoint's own files beside the weights ("" when absent).
  const std::string& tokenizer_json_path() const { return tokenizer_json_; }
  const std::string& tokenizer_config_path() const { return tokenizer_config_; }
  const std::string& generation_config_path() const { return generation_config_; }
  // config.json's architectures[0].
  const std::string& hf_architecture() const { return hf_arch_; }
  // vocab_size from config.json (the embedding's rows).
  int64_t vocab_size() const { return vocab_size_; }
  // One line per kind of conversion done at open ("q/k rows permuted for llama RoPE:
  // 4 tensors", ...); empty when every tensor is used in place.
  const std::vector<std::string>& conversions() const { return conversions_; }
  // Tensors of the shards that no GGUF tensor comes from (e.g. rotary inv_freq).
  const std::vector<std::string>& unused() const { return unused_; }

  HfCheckpoint(const HfCheckpoint&) = delete;
  HfCheckpoint& operator=(const HfCheckpoint&) = delete;

 private:
  friend class HfCheckpointBuilder;
  HfCheckpoint() = default;

  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::deque<std::vector<uint8_t>> buffers_;  // converted tensors' bytes
  std::deque<std::vector<float>> floats_;     // per-row scales / offsets of int8 matrices
  std::deque<std::vector<int32_t>> ints_;     // static quant_bias rows
  std::deque<Int8RowParams> params_;          // one per int8 matrix
  std::deque<std::vector<Int8RowParams>> param_arrays_;  // one per int8 expert stack
  std::string tokenizer_json_, tokenizer_config_, generation_config_;
  std::string hf_arch_;
  int64_t vocab_size_ = 0;
  std::vector<std::string> conversions_;
  std::vector<std::string> unused_;
};

}  // namespace tandem
