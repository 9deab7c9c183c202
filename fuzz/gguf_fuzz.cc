// libFuzzer target: GGUF parsing and everything that reads its metadata and tensors
// (config, vocab, weight binding). Any input must give a Status, never a crash.
#include <cstddef>
#include <cstdint>

#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = tandem::GgufFile::FromBuffer(data, size);
  if (!file.ok()) return 0;
  const tandem::GgufFile& f = **file;
  for (const auto& [key, value] : f.metadata()) {
    (void)f.GetString(key);
    (void)f.GetInt(key);
    (void)f.GetFloatArray(key);
  }
  (void)tandem::LoadVocab(f);
  auto config = tandem::LoadModelConfig(f);
  if (config.ok() && config->n_vocab > 0 && config->n_layers < 64) {
    (void)tandem::BindWeights(f, *config);
  }
  return 0;
}
