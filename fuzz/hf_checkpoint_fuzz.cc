// libFuzzer target: a Hugging Face checkpoint directory's JSON files as Model::Load reads
// them. The first byte picks the file the rest of the input becomes — tokenizer.json
// (read into the vocabulary), config.json (translated to the architecture's keys) or
// tokenizer_config.json — beside valid others and one small safetensors shard (written
// once). Any input must give a Status, never a crash; a model that loads tokenizes and
// detokenizes a few strings.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/little_endian.h"
#include "common/logging.h"
#include "model/model.h"

namespace {

namespace fs = std::filesystem;

const char* kConfig = R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 8, "intermediate_size": 8,
  "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
  "vocab_size": 8, "tie_word_embeddings": true, "max_position_embeddings": 64})";
const char* kTokenizer = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "d": 3, "e": 4,
  "f": 5, "g": 6, "ab": 7}, "merges": ["a b"]}, "added_tokens": [],
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "decoder": {"type": "ByteLevel"}})";

void Write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// config.json's tensors, F32 zeros: [8, 8] embedding, norms, q [8, 8], k/v [4, 8], o [8, 8],
// gate/up [8, 8], down [8, 8], q/k norms [4].
fs::path MakeDir() {
  fs::path dir = fs::temp_directory_path() / ("tandem_hf_fuzz_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct T { const char* name; int rows, cols; };
  const T tensors[] = {{"model.embed_tokens.weight", 8, 8}, {"model.norm.weight", 8, 0},
                       {"model.layers.0.input_layernorm.weight", 8, 0},
                       {"model.layers.0.post_attention_layernorm.weight", 8, 0},
                       {"model.layers.0.self_attn.q_proj.weight", 8, 8},
                       {"model.layers.0.self_attn.k_proj.weight", 4, 8},
                       {"model.layers.0.self_attn.v_proj.weight", 4, 8},
                       {"model.layers.0.self_attn.o_proj.weight", 8, 8},
                       {"model.layers.0.self_attn.q_norm.weight", 4, 0},
                       {"model.layers.0.self_attn.k_norm.weight", 4, 0},
                       {"model.layers.0.mlp.gate_proj.weight", 8, 8},
                       {"model.layers.0.mlp.up_proj.weight", 8, 8},
                       {"model.layers.0.mlp.down_proj.weight", 8, 8}};
  std::string header = "{";
  size_t offset = 0;
  for (const T& t : tensors) {
    const size_t bytes = static_cast<size_t>(t.rows) * (t.cols ? t.cols : 1) * 4;
    std::string shape = t.cols ? std::to_string(t.rows) + "," + std::to_string(t.cols) : std::to_string(t.rows);
    header += (header.size() > 1 ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"F32\",\"shape\":[" +
              shape + "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  std::string file(8, '\0');
  tandem::little_endian::Store<uint64_t>(reinterpret_cast<uint8_t*>(file.data()), header.size());
  file += header + std::string(offset, '\0');
  Write(dir / "model.safetensors", file);
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fs::path dir = [] {
    tandem::SetMinLogLevel(tandem::LogLevel::kError);
    return MakeDir();
  }();
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const int which = data[0] % 3;
  Write(dir / "config.json", which == 1 ? rest : kConfig);
  Write(dir / "tokenizer.json", which == 0 ? rest : kTokenizer);
  Write(dir / "tokenizer_config.json", which == 2 ? rest : "{\"eos_token\": \"g\"}");
  auto model = tandem::Model::Load(dir.string());
  if (model.ok()) {
    const tandem::Tokenizer& t = (*model)->tokenizer();
    for (const char* text : {"abc", "", "g\xff\xfe ab", "\xe4\xbd\xa0"}) {
      std::vector<int32_t> ids = t.Encode(text, true, true);
      (void)t.Decode(ids, false);
    }
  }
  return 0;
}
