// LoadVocab: the tokenizer data stored in a GGUF file's `tokenizer.ggml.*` metadata, as a
// Vocab (tokenizer/vocab.h).
//
// Thread safety: a pure function of the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/vocab.h"

namespace tandem {

class ModelSource;

// Reads the vocab from GGUF metadata; InvalidArgument/NotFound naming the key on bad data.
StatusOr<Vocab> LoadVocab(const ModelSource& file);

}  // namespace tandem
