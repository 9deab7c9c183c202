// HfCheckpointBuilder: fills an HfCheckpoint (hf_checkpoint.h) — internal to the reader,
// whose work it splits by concept over three files:
//   hf_checkpoint.cc    config.json access, the architecture, the shards and their index,
//                       the quantization scheme, and the order of the steps (Build);
//   hf_config_keys.cc   config.json translated to the GGUF keys (hyper-parameters, RoPE
//                       scaling, MoE / MLA / DSA keys, the chat template);
//   hf_tensors.cc       the tensors: HF names to GGUF's, quantized tensors resolved
//                       (int8 rows with their scales, FP8 dequantized), the transforms.
// Thread safety: used by one thread, during HfCheckpoint::Open.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "kernels/matmul.h"
#include "model/hf_checkpoint.h"
#include "model/safetensors_file.h"

namespace tandem {
namespace hf_internal {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// The file's bytes; NotFound naming it when it cannot be read.
StatusOr<std::string> ReadFile(const fs::path& path);
// The file as JSON; InvalidArgument naming it when it is not JSON.
StatusOr<Json> ReadJson(const fs::path& path);
// j[key] when it is a string (else `fallback`): json::value() throws on another type.
std::string StrOf(const Json& j, const char* key, const std::string& fallback = "");

}  // namespace hf_internal

class HfCheckpointBuilder {
 public:
  using Json = hf_internal::Json;

  HfCheckpointBuilder(HfCheckpoint* ckpt, std::filesystem::path dir) : c_(ckpt), dir_(std::move(dir)) {}

  Status Build();

 private:
  std::string Where() const { return (dir_ / "config.json").string() + ": "; }

  // ---- config.json access, errors naming the key ----------------------------------
  const Json* Key(const char* key) const;
  StatusOr<int64_t> Int(const char* key) const;
  StatusOr<int64_t> IntOr(const char* key, int64_t fallback) const;
  StatusOr<double> Number(const Json& obj, const char* key, const std::string& where) const;
  StatusOr<double> NumberOr(const char* key, double fallback) const;
  StatusOr<bool> BoolOr(const char* key, bool fallback) const;
  StatusOr<std::string> StringOr(const char* key, std::string fallback) const;

  // ---- metadata ---------------------------------------------------------------------
  std::string K(const char* suffix) const { return arch_ + "." + suffix; }
  Status PutUint(const std::string& key, int64_t v);
  Status PutFloat(const std::string& key, double v);
  Status PutBool(const std::string& key, bool v);
  Status PutString(const std::string& key, std::string v);
  // An integer key of config.json copied to a GGUF key when present.
  Status CopyInt(const char* hf, const char* suffix);

  Status FindArchitecture();

  // ---- shards -----------------------------------------------------------------------
  Status OpenShards();

  // The scheme, from quant_model_description.json (msmodelslim, the seeds' Ascend
  // format) or config.json's quantization_config; anything else is refused by name.
  Status CheckQuantization();

  // ---- config.json -> GGUF keys (convert_hf_to_gguf.py's set_gguf_parameters) --------
  Status AddConfigMetadata();

  // rope_theta and rope_scaling (transformers' `rope_scaling`, or `rope_parameters`).
  Status AddRopeMetadata();

  // Llama 3.1's rope_freqs.weight, as convert_hf_to_gguf.py computes it (in float32,
  // the order of its torch expressions; bit for bit against it on the llama fixture): for pair i, freq = 1 / base^(2i / dim), its
  // wavelength 2 pi / freq, then factor 1 below the high-frequency wavelength, `factor`
  // above the low-frequency one, and a smooth 1 / ((1 - s) / factor + s) between.
  Status Llama3RopeFactors(const Json& sc, const std::string& where, double theta);

  Status AddGemma3Metadata();

  Status AddMoeMetadata();

  Status AddMlaMetadata();

  // tokenizer.chat_template from tokenizer_config.json (a string, or a list of
  // {name, template} whose "default" entry is the template) or chat_template.jinja.
  Status AddTemplateMetadata();

  // ---- tensors ----------------------------------------------------------------------
  // A tensor as the transforms see it: HF's shape order ([rows, cols] or [n]), a
  // Tandem type, and for kI8Rows the per-row arrays (owned by the checkpoint).
  struct Src {
    std::string name;  // the HF name, for messages
    TensorType type = TensorType::kF32;
    std::vector<int64_t> shape;
    const uint8_t* data = nullptr;
    uint64_t bytes = 0;
    uint64_t begin = 0;  // offset in its shard (or a unique number for converted data)
    const float* scale = nullptr;
    const float* offset = nullptr;
    const int32_t* bias = nullptr;
    float act_scale = 0, act_offset = 0;

    int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
    int64_t cols() const { return shape.size() < 2 ? (shape.empty() ? 1 : shape[0]) : shape[1]; }
    int64_t row_bytes() const { return static_cast<int64_t>(bytes) / (shape.size() < 2 ? 1 : rows()); }
    bool is_float() const {
      return type == TensorType::kF32 || type == TensorType::kF16 || type == TensorType::kBF16;
    }
  };

  // The HF tensor `hf_name` (nullptr if absent), marked as used.
  const SafetensorsTensor* Take(const std::string& hf_name);

  std::string ModuleOf(const std::string& weight_name) const;
  const SafetensorsTensor* Companion(const std::string& module, const char* suffix);
  // A small float tensor (scales, offsets) as float32 values; InvalidArgument unless it
  // holds `n` values (or one, broadcast, when `broadcast`).
  StatusOr<std::vector<float>> Floats(const SafetensorsTensor& t, int64_t n, bool broadcast);
  const float* KeepFloats(std::vector<float> v);

  // The tensor `hf_name` resolved to a type the kernels take: float as stored, int8
  // weights with their scales (compressed-tensors, msmodelslim), FP8 block-scaled
  // weights dequantized and stored as Q8_0 (F32 when a row is not whole 32-blocks).
  StatusOr<Src> Resolve(const SafetensorsTensor& t);

  // e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; 0x7f / 0xff are NaN.
  static float Fp8E4M3(uint8_t b);

  // FP8 block-scaled (DeepSeek-V3 style): w = fp8 x weight_scale_inv[r / bs0][c / bs1].
  StatusOr<Src> DequantizeFp8(const SafetensorsTensor& t, const std::string& module);

  const Int8RowParams* KeepParams(const Src& s, int64_t row0);

  // Adds `s` as GGUF tensor `gguf_name` (dims reversed: the row length first). A stack
  // of `n_matrices` > 1 gets one Int8RowParams per matrix (kI8Rows).
  Status Emit(const std::string& gguf_name, const Src& s, std::vector<int64_t> dims = {});
  // n Int8RowParams in one array (a stack's At(i) indexes it).
  const Int8RowParams* KeepParamArray(const Src& s, int64_t n, int64_t rows_each);

  // Keeps converted bytes; returns a Src over them with `like`'s type and arrays.
  Src Owned(const Src& like, std::vector<int64_t> shape, std::vector<uint8_t> bytes);

  // Row r of `s` as float32 values.
  void RowAsFloat(const Src& s, int64_t r, float* out) const;

  // `s` widened to F32 values plus `shift` (Gemma's norm + 1; routers as the converter
  // writes them).
  Src AsF32(const Src& s, float shift);

  // Rows gathered in `order` (and the per-row arrays with them).
  Src GatherRows(const Src& s, const std::vector<int64_t>& order);

  // llama's q/k rows (or bias) from HF's rotate-half order to GGUF's adjacent pairs:
  // reshape(n_head, 2, rows / n_head / 2, ...).swapaxes(1, 2).
  StatusOr<Src> Permuted(const Src& s, int64_t n_head);

  // Per-expert matrices [rows, cols] stacked into one GGUF tensor {cols, rows, n}.
  Status Stacked(const std::string& gguf_name, const std::vector<Src>& parts);

  // MLA's kv_b_proj [n_head * (nope + v), kv_lora] split into k_b {nope, kv_lora, n_head}
  // (each head's K rows transposed) and v_b {kv_lora, v, n_head}. Float tensors keep
  // their type (elements moved, not converted); others are dequantized to F32.
  Status SplitKvB(const std::string& prefix, const Src& in);

  // The GGUF name of a per-layer HF tensor suffix (after "model.layers.N."), "" if none.
  std::string LayerName(const std::string& s, bool nextn) const;

  Status AddTensors();

  static bool ParseIndex(const std::string& s, int64_t* out);

  HfCheckpoint* c_;
  std::filesystem::path dir_;
  Json config_;
  std::string arch_;
  bool mla_ = false;
  bool tied_ = false;
  int64_t n_layers_ = 0, n_nextn_ = 0, n_embd_ = 0, n_head_ = 0, n_head_kv_ = 0, head_dim_ = 0;
  int64_t n_expert_ = 0, kv_lora_ = 0, nope_ = 0, v_head_ = 0;
  std::map<std::string, const SafetensorsTensor*> hf_;
  std::set<std::string> used_;
  enum class Quant { kNone, kCompressedTensors, kModelSlim, kFp8 };
  Quant quant_ = Quant::kNone;
  std::map<std::string, std::string> description_;  // msmodelslim: tensor -> scheme
  int64_t fp8_block_[2] = {128, 128};
  int permuted_ = 0, shifted_ = 0, stacked_ = 0, split_ = 0, widened_ = 0, fp8_ = 0;
  int int8_dynamic_ = 0, int8_static_ = 0;
  int64_t stacked_bytes_ = 0;
};

}  // namespace tandem
