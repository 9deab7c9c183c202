// The checkpoint's tensors under GGUF's names and layouts: quantized tensors resolved
// (int8 rows with their per-row scales, FP8 dequantized to Q8_0) and the transforms
// convert_hf_to_gguf.py applies (part of HfCheckpointBuilder: hf_checkpoint_builder.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/dequant.h"
#include "kernels/half.h"
#include "model/hf_checkpoint_builder.h"

namespace tandem {
namespace {

using Json = hf_internal::Json;

bool IsFloatDtype(SafetensorsDtype d) {
  return d == SafetensorsDtype::kF32 || d == SafetensorsDtype::kF16 || d == SafetensorsDtype::kBF16;
}

TensorType FloatType(SafetensorsDtype d) {
  return d == SafetensorsDtype::kF32 ? TensorType::kF32
                                     : d == SafetensorsDtype::kF16 ? TensorType::kF16 : TensorType::kBF16;
}

// Element i of a float tensor as float32 (exact for F16 / BF16).
float FloatAt(const SafetensorsTensor& t, int64_t i) {
  switch (t.dtype) {
    case SafetensorsDtype::kF32: {
      float v;
      std::memcpy(&v, t.data + i * 4, 4);
      return v;
    }
    case SafetensorsDtype::kF16: {
      uint16_t h;
      std::memcpy(&h, t.data + i * 2, 2);
      return Fp16ToFp32(h);
    }
    default: {
      uint16_t h;
      std::memcpy(&h, t.data + i * 2, 2);
      uint32_t bits = static_cast<uint32_t>(h) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      return v;
    }
  }
}

}  // namespace

using hf_internal::ReadJson;
namespace fs = std::filesystem;

const SafetensorsTensor* HfCheckpointBuilder::Take(const std::string& hf_name) {
  auto it = hf_.find(hf_name);
  if (it == hf_.end()) return nullptr;
  used_.insert(hf_name);
  return it->second;
}

std::string HfCheckpointBuilder::ModuleOf(const std::string& weight_name) const {
  return weight_name.ends_with(".weight") ? weight_name.substr(0, weight_name.size() - 7) : weight_name;
}

const SafetensorsTensor* HfCheckpointBuilder::Companion(const std::string& module, const char* suffix) {
  return Take(module + "." + suffix);
}

StatusOr<std::vector<float>> HfCheckpointBuilder::Floats(const SafetensorsTensor& t, int64_t n, bool broadcast) {
  if (!IsFloatDtype(t.dtype)) {
    return InvalidArgumentError("tensor '" + t.name + "' has dtype " + std::string(SafetensorsDtypeName(t.dtype)) +
                                ", expected F32, F16 or BF16");
  }
  if (t.num_elements != n && !(broadcast && t.num_elements == 1)) {
    return InvalidArgumentError("tensor '" + t.name + "' has " + std::to_string(t.num_elements) +
                                " values, expected " + std::to_string(n));
  }
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = FloatAt(t, t.num_elements == 1 ? 0 : i);
  return out;
}

const float* HfCheckpointBuilder::KeepFloats(std::vector<float> v) {
  c_->floats_.push_back(std::move(v));
  return c_->floats_.back().data();
}

StatusOr<HfCheckpointBuilder::Src> HfCheckpointBuilder::Resolve(const SafetensorsTensor& t) {
  Src s;
  s.name = t.name;
  s.shape = t.shape;
  s.data = t.data;
  s.bytes = t.size_bytes();
  s.begin = t.begin;
  if (IsFloatDtype(t.dtype)) {
    s.type = FloatType(t.dtype);
    return s;
  }
  const std::string module = ModuleOf(t.name);
  if (t.dtype == SafetensorsDtype::kI8 && quant_ != Quant::kNone && quant_ != Quant::kFp8) {
    if (t.shape.size() != 2) return InvalidArgumentError("int8 tensor '" + t.name + "' is not a matrix");
    const int64_t rows = t.shape[0];
    s.type = TensorType::kI8Rows;
    std::string scheme = "W8A8_DYNAMIC";
    if (quant_ == Quant::kModelSlim) {
      auto it = description_.find(t.name);
      scheme = it != description_.end() ? it->second : "";
      if (scheme != "W8A8_DYNAMIC" && scheme != "W8A8") {
        return UnimplementedError((dir_ / "quant_model_description.json").string() + ": tensor '" + t.name +
                                  "' is int8 with scheme '" + scheme +
                                  "' (supported: W8A8_DYNAMIC, W8A8, FLOAT)");
      }
    }
    if (scheme == "W8A8") {  // msmodelslim static
      const SafetensorsTensor* deq = Companion(module, "deq_scale");
      const SafetensorsTensor* qb = Companion(module, "quant_bias");
      const SafetensorsTensor* is = Companion(module, "input_scale");
      const SafetensorsTensor* io = Companion(module, "input_offset");
      if (deq == nullptr || is == nullptr || io == nullptr) {
        return NotFoundError(dir_.string() + ": W8A8 tensor '" + t.name +
                             "' lacks its deq_scale, input_scale or input_offset");
      }
      std::vector<float> d(static_cast<size_t>(rows));
      if (deq->num_elements != rows) {
        return InvalidArgumentError("tensor '" + deq->name + "' has " + std::to_string(deq->num_elements) +
                                    " values, expected " + std::to_string(rows));
      }
      if (deq->dtype == SafetensorsDtype::kI64) {  // fp32 bits in the low 32 bits
        for (int64_t r = 0; r < rows; ++r) {
          uint32_t bits;
          std::memcpy(&bits, deq->data + r * 8, 4);
          std::memcpy(&d[r], &bits, 4);
        }
      } else {
        TANDEM_ASSIGN_OR_RETURN(d, Floats(*deq, rows, false));
      }
      s.scale = KeepFloats(std::move(d));
      if (qb != nullptr) {
        if (qb->dtype != SafetensorsDtype::kI32 || qb->num_elements != rows) {
          return InvalidArgumentError("tensor '" + qb->name + "' must be I32 with " + std::to_string(rows) + " values");
        }
        std::vector<int32_t> b(static_cast<size_t>(rows));
        std::memcpy(b.data(), qb->data, static_cast<size_t>(rows) * 4);
        c_->ints_.push_back(std::move(b));
        s.bias = c_->ints_.back().data();
      }
      TANDEM_ASSIGN_OR_RETURN(std::vector<float> sc, Floats(*is, 1, true));
      TANDEM_ASSIGN_OR_RETURN(std::vector<float> of, Floats(*io, 1, true));
      if (!(sc[0] > 0) || !std::isfinite(sc[0])) {
        return InvalidArgumentError("tensor '" + is->name + "' must be a positive scale");
      }
      s.act_scale = sc[0];
      s.act_offset = of[0];
      // The weight's own scale / offset, which deq_scale and quant_bias already hold.
      Companion(module, "weight_scale");
      Companion(module, "weight_offset");
      ++int8_static_;
      return s;
    }
    const SafetensorsTensor* ws = Companion(module, "weight_scale");
    if (ws == nullptr) return NotFoundError(dir_.string() + ": int8 tensor '" + t.name + "' lacks " + module + ".weight_scale");
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> sc, Floats(*ws, rows, false));
    s.scale = KeepFloats(std::move(sc));
    if (const SafetensorsTensor* wo = Companion(module, "weight_offset")) {
      TANDEM_ASSIGN_OR_RETURN(std::vector<float> of, Floats(*wo, rows, false));
      if (std::any_of(of.begin(), of.end(), [](float v) { return v != 0; })) s.offset = KeepFloats(std::move(of));
    }
    ++int8_dynamic_;
    return s;
  }
  if (t.dtype == SafetensorsDtype::kF8E4M3 && quant_ == Quant::kFp8) return DequantizeFp8(t, module);
  std::string hint = quant_ == Quant::kNone ? " (config.json has no quantization_config saying how to read it)" : "";
  return UnimplementedError("tensor '" + t.name + "' has dtype " + std::string(SafetensorsDtypeName(t.dtype)) +
                            " which Tandem cannot compute with" + hint);
}

float HfCheckpointBuilder::Fp8E4M3(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 7;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(man) / 8.0f, -6);
  } else if (exp == 15 && man == 7) {
    v = std::nanf("");
  } else {
    v = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  }
  return sign ? -v : v;
}

StatusOr<HfCheckpointBuilder::Src> HfCheckpointBuilder::DequantizeFp8(const SafetensorsTensor& t, const std::string& module) {
  if (t.shape.size() != 2) return InvalidArgumentError("FP8 tensor '" + t.name + "' is not a matrix");
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const SafetensorsTensor* inv = Companion(module, "weight_scale_inv");
  if (inv == nullptr) return NotFoundError(dir_.string() + ": FP8 tensor '" + t.name + "' lacks " + module + ".weight_scale_inv");
  const int64_t br = (rows + fp8_block_[0] - 1) / fp8_block_[0], bc = (cols + fp8_block_[1] - 1) / fp8_block_[1];
  if (inv->shape.size() != 2 || inv->shape[0] != br || inv->shape[1] != bc) {
    return InvalidArgumentError("tensor '" + inv->name + "' must have shape [" + std::to_string(br) + ", " +
                                std::to_string(bc) + "] for blocks of " + std::to_string(fp8_block_[0]) + "x" +
                                std::to_string(fp8_block_[1]));
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> scales, Floats(*inv, br * bc, false));
  const bool q8 = cols % 32 == 0;
  const int64_t out_row = q8 ? *RowBytes(TensorType::kQ8_0, cols) : cols * 4;
  std::vector<uint8_t> out(static_cast<size_t>(rows * out_row));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      row[c] = Fp8E4M3(t.data[r * cols + c]) * scales[(r / fp8_block_[0]) * bc + c / fp8_block_[1]];
    }
    if (q8) {
      QuantizeRowQ8_0(row.data(), out.data() + r * out_row, cols);
    } else {
      std::memcpy(out.data() + r * out_row, row.data(), static_cast<size_t>(cols) * 4);
    }
  }
  ++fp8_;
  c_->buffers_.push_back(std::move(out));
  Src s;
  s.name = t.name;
  s.type = q8 ? TensorType::kQ8_0 : TensorType::kF32;
  s.shape = t.shape;
  s.data = c_->buffers_.back().data();
  s.bytes = c_->buffers_.back().size();
  s.begin = t.begin;
  return s;
}

const Int8RowParams* HfCheckpointBuilder::KeepParams(const Src& s, int64_t row0) {
  Int8RowParams p;
  p.scale = s.scale ? s.scale + row0 : nullptr;
  p.offset = s.offset ? s.offset + row0 : nullptr;
  p.bias = s.bias ? s.bias + row0 : nullptr;
  p.act_scale = s.act_scale;
  p.act_offset = s.act_offset;
  c_->params_.push_back(p);
  return &c_->params_.back();
}

Status HfCheckpointBuilder::Emit(const std::string& gguf_name, const Src& s, std::vector<int64_t> dims) {
  GgufTensorInfo g;
  g.name = gguf_name;
  g.type = s.type;
  g.dims = dims.empty() ? std::vector<int64_t>(s.shape.rbegin(), s.shape.rend()) : std::move(dims);
  if (g.dims.empty()) g.dims.push_back(1);
  g.num_elements = 1;
  for (int64_t d : g.dims) g.num_elements *= d;
  g.data = s.data;
  g.size_bytes = s.bytes;
  g.offset = s.begin;
  if (s.type == TensorType::kI8Rows) {
    g.i8 = g.dims.size() == 3 ? KeepParamArray(s, g.dims[2], g.dims[1]) : KeepParams(s, 0);
  }
  return c_->AddTensor(std::move(g));
}

const Int8RowParams* HfCheckpointBuilder::KeepParamArray(const Src& s, int64_t n, int64_t rows_each) {
  std::vector<Int8RowParams> a(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    a[i].scale = s.scale ? s.scale + i * rows_each : nullptr;
    a[i].offset = s.offset ? s.offset + i * rows_each : nullptr;
    a[i].bias = s.bias ? s.bias + i * rows_each : nullptr;
    a[i].act_scale = s.act_scale;
    a[i].act_offset = s.act_offset;
  }
  c_->param_arrays_.push_back(std::move(a));
  return c_->param_arrays_.back().data();
}

HfCheckpointBuilder::Src HfCheckpointBuilder::Owned(const Src& like, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  c_->buffers_.push_back(std::move(bytes));
  Src s = like;
  s.shape = std::move(shape);
  s.data = c_->buffers_.back().data();
  s.bytes = c_->buffers_.back().size();
  s.begin = (uint64_t{1} << 62) + c_->buffers_.size();  // not a file offset: unique
  return s;
}

void HfCheckpointBuilder::RowAsFloat(const Src& s, int64_t r, float* out) const {
  const int64_t cols = s.cols();
  const uint8_t* row = s.data + r * s.row_bytes();
  if (s.type == TensorType::kI8Rows) {
    const float off = s.offset ? s.offset[r] : 0.0f;
    for (int64_t c = 0; c < cols; ++c) {
      const float q = static_cast<float>(static_cast<int8_t>(row[c]));
      out[c] = s.act_scale > 0 ? q * s.scale[r] / s.act_scale : (q - off) * s.scale[r];
    }
    return;
  }
  DequantizeRow(s.type, row, out, cols);
}

HfCheckpointBuilder::Src HfCheckpointBuilder::AsF32(const Src& s, float shift) {
  const int64_t rows = s.shape.size() < 2 ? 1 : s.rows(), cols = s.cols();
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * cols) * 4);
  for (int64_t r = 0; r < rows; ++r) {
    float* out = reinterpret_cast<float*>(bytes.data()) + r * cols;
    RowAsFloat(s, r, out);
    for (int64_t c = 0; c < cols; ++c) out[c] += shift;
  }
  Src f = s;
  f.type = TensorType::kF32;
  f.scale = f.offset = nullptr;
  f.bias = nullptr;
  f.act_scale = f.act_offset = 0;
  return Owned(f, s.shape, std::move(bytes));
}

HfCheckpointBuilder::Src HfCheckpointBuilder::GatherRows(const Src& s, const std::vector<int64_t>& order) {
  const int64_t rb = s.row_bytes();
  std::vector<uint8_t> bytes(s.bytes);
  for (size_t i = 0; i < order.size(); ++i) std::memcpy(bytes.data() + i * rb, s.data + order[i] * rb, rb);
  Src out = Owned(s, s.shape, std::move(bytes));
  auto gather_f = [&](const float* a) -> const float* {
    if (a == nullptr) return nullptr;
    std::vector<float> v(order.size());
    for (size_t i = 0; i < order.size(); ++i) v[i] = a[order[i]];
    return KeepFloats(std::move(v));
  };
  out.scale = gather_f(s.scale);
  out.offset = gather_f(s.offset);
  if (s.bias != nullptr) {
    std::vector<int32_t> v(order.size());
    for (size_t i = 0; i < order.size(); ++i) v[i] = s.bias[order[i]];
    c_->ints_.push_back(std::move(v));
    out.bias = c_->ints_.back().data();
  }
  return out;
}

StatusOr<HfCheckpointBuilder::Src> HfCheckpointBuilder::Permuted(const Src& s, int64_t n_head) {
  const int64_t rows = s.rows();
  if (rows % (2 * n_head) != 0) {
    return InvalidArgumentError("tensor '" + s.name + "' has " + std::to_string(rows) +
                                " rows, not a multiple of 2 x " + std::to_string(n_head) + " heads");
  }
  const int64_t per_head = rows / n_head, half = per_head / 2;
  std::vector<int64_t> order(static_cast<size_t>(rows));
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) order[h * per_head + i * 2 + j] = h * per_head + j * half + i;
  ++permuted_;
  return GatherRows(s, order);
}

Status HfCheckpointBuilder::Stacked(const std::string& gguf_name, const std::vector<Src>& parts) {
  const Src& first = parts[0];
  if (first.shape.size() != 2) return InvalidArgumentError("tensor '" + first.name + "' is not a matrix");
  if (first.type == TensorType::kI8Rows && first.act_scale > 0) {
    // An MoE layer quantizes each token once for all its experts (dynamic); msmodelslim
    // writes experts as W8A8_DYNAMIC.
    return UnimplementedError("expert tensor '" + first.name +
                              "' is static W8A8 (per-tensor activation scales): experts are supported as "
                              "W8A8_DYNAMIC or float");
  }
  std::vector<uint8_t> bytes;
  bytes.reserve(first.bytes * parts.size());
  std::vector<float> scale, offset;
  std::vector<int32_t> bias;
  for (const Src& p : parts) {
    if (p.type != first.type || p.shape != first.shape || (p.offset == nullptr) != (first.offset == nullptr) ||
        (p.bias == nullptr) != (first.bias == nullptr) || p.act_scale != first.act_scale ||
        p.act_offset != first.act_offset) {
      return InvalidArgumentError("expert tensor '" + p.name + "' differs in type, shape or quantization from '" +
                                  first.name + "'");
    }
    bytes.insert(bytes.end(), p.data, p.data + p.bytes);
    if (p.scale) scale.insert(scale.end(), p.scale, p.scale + p.rows());
    if (p.offset) offset.insert(offset.end(), p.offset, p.offset + p.rows());
    if (p.bias) bias.insert(bias.end(), p.bias, p.bias + p.rows());
  }
  ++stacked_;
  stacked_bytes_ += static_cast<int64_t>(bytes.size());
  Src s = Owned(first, {static_cast<int64_t>(parts.size()) * first.rows(), first.cols()}, std::move(bytes));
  s.scale = scale.empty() ? nullptr : KeepFloats(std::move(scale));
  s.offset = offset.empty() ? nullptr : KeepFloats(std::move(offset));
  if (!bias.empty()) {
    c_->ints_.push_back(std::move(bias));
    s.bias = c_->ints_.back().data();
  }
  return Emit(gguf_name, s, {first.cols(), first.rows(), static_cast<int64_t>(parts.size())});
}

Status HfCheckpointBuilder::SplitKvB(const std::string& prefix, const Src& in) {
  const int64_t lora = kv_lora_;
  if (in.shape.size() != 2 || in.rows() != n_head_ * (nope_ + v_head_) || in.cols() != lora) {
    return InvalidArgumentError("tensor '" + in.name + "' must have shape [" + std::to_string(n_head_ * (nope_ + v_head_)) +
                                ", " + std::to_string(lora) + "]");
  }
  const Src t = in.is_float() ? in : AsF32(in, 0.0f);
  const int64_t es = static_cast<int64_t>(t.bytes) / (t.rows() * lora);
  std::vector<uint8_t> k(static_cast<size_t>(n_head_ * lora * nope_ * es));
  std::vector<uint8_t> v(static_cast<size_t>(n_head_ * v_head_ * lora * es));
  for (int64_t h = 0; h < n_head_; ++h) {
    const uint8_t* head = t.data + h * (nope_ + v_head_) * lora * es;
    for (int64_t i = 0; i < nope_; ++i) {
      for (int64_t j = 0; j < lora; ++j) {
        std::memcpy(k.data() + ((h * lora + j) * nope_ + i) * es, head + (i * lora + j) * es, es);
      }
    }
    std::memcpy(v.data() + h * v_head_ * lora * es, head + nope_ * lora * es, v_head_ * lora * es);
  }
  ++split_;
  TANDEM_RETURN_IF_ERROR(Emit(prefix + "attn_k_b.weight", Owned(t, {n_head_ * lora, nope_}, std::move(k)),
                              {nope_, lora, n_head_}));
  return Emit(prefix + "attn_v_b.weight", Owned(t, {n_head_ * v_head_, lora}, std::move(v)), {lora, v_head_, n_head_});
}

std::string HfCheckpointBuilder::LayerName(const std::string& s, bool nextn) const {
  static const std::map<std::string, std::string> kCommon = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
      {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
      {"self_attn.q_a_proj.weight", "attn_q_a.weight"},
      {"self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight"},
      {"self_attn.q_b_proj.weight", "attn_q_b.weight"},
      {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight"},
      {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight"},
      {"self_attn.indexer.wq_b.weight", "indexer.attn_q_b.weight"},
      {"self_attn.indexer.wk.weight", "indexer.attn_k.weight"},
      {"self_attn.indexer.k_norm.weight", "indexer.k_norm.weight"},
      {"self_attn.indexer.k_norm.bias", "indexer.k_norm.bias"},
      {"self_attn.indexer.weights_proj.weight", "indexer.proj.weight"},
  };
  if (s == "post_attention_layernorm.weight") {
    return arch_ == "gemma3" || arch_ == "glm4moe" ? "post_attention_norm.weight" : "ffn_norm.weight";
  }
  if (arch_ == "gemma3") {
    if (s == "pre_feedforward_layernorm.weight") return "ffn_norm.weight";
    if (s == "post_feedforward_layernorm.weight") return "post_ffw_norm.weight";
  }
  if (nextn) {
    static const std::map<std::string, std::string> kNextn = {
        {"eh_proj.weight", "nextn.eh_proj.weight"},
        {"enorm.weight", "nextn.enorm.weight"},
        {"hnorm.weight", "nextn.hnorm.weight"},
        {"shared_head.norm.weight", "nextn.shared_head_norm.weight"},
        {"shared_head.head.weight", "nextn.shared_head_head.weight"},
        {"embed_tokens.weight", "nextn.embed_tokens.weight"},
    };
    if (auto it = kNextn.find(s); it != kNextn.end()) return it->second;
  }
  auto it = kCommon.find(s);
  return it == kCommon.end() ? "" : it->second;
}

Status HfCheckpointBuilder::AddTensors() {
  const float norm_shift = arch_ == "gemma3" ? 1.0f : 0.0f;
  // Global tensors.
  const SafetensorsTensor* embd = Take("model.embed_tokens.weight");
  if (embd == nullptr) return NotFoundError(dir_.string() + ": the checkpoint lacks model.embed_tokens.weight");
  TANDEM_ASSIGN_OR_RETURN(Src e, Resolve(*embd));
  // Gemma's embedding has rows past the tokenizer's tokens; the converter drops them.
  if (arch_ == "gemma3" && !c_->tokenizer_json_.empty()) {
    TANDEM_ASSIGN_OR_RETURN(Json tok, ReadJson(c_->tokenizer_json_));
    if (tok.is_object() && tok.contains("model") && tok["model"].is_object() && tok["model"].contains("vocab") &&
        tok.contains("added_tokens") && tok["added_tokens"].is_array()) {
      const int64_t n = static_cast<int64_t>(tok["model"]["vocab"].size() + tok["added_tokens"].size());
      if (n < e.rows()) {
        e.bytes = static_cast<uint64_t>(n * e.row_bytes());
        e.shape[0] = n;
        c_->vocab_size_ = n;
      }
    }
  }
  TANDEM_RETURN_IF_ERROR(Emit("token_embd.weight", e));
  if (const SafetensorsTensor* t = Take("model.norm.weight")) {
    TANDEM_ASSIGN_OR_RETURN(Src n, Resolve(*t));
    TANDEM_RETURN_IF_ERROR(Emit("output_norm.weight", norm_shift != 0 ? AsF32(n, norm_shift) : n));
  }
  if (const SafetensorsTensor* t = Take("lm_head.weight"); t != nullptr && !tied_) {
    TANDEM_ASSIGN_OR_RETURN(Src h, Resolve(*t));
    TANDEM_RETURN_IF_ERROR(Emit("output.weight", h));
  }
  // Per-layer tensors, experts gathered per layer and projection. The names are
  // collected first: Resolve takes companion tensors (scales) from hf_ as it goes.
  std::map<std::pair<int64_t, std::string>, std::map<int64_t, const SafetensorsTensor*>> experts;
  std::vector<std::pair<std::string, const SafetensorsTensor*>> layer_tensors(hf_.begin(), hf_.end());
  const int64_t n_blocks = n_layers_ + n_nextn_;
  for (const auto& [name, t] : layer_tensors) {
    if (!name.starts_with("model.layers.")) continue;
    size_t dot = name.find('.', 13);
    if (dot == std::string::npos) continue;
    int64_t il = -1;
    if (!ParseIndex(name.substr(13, dot - 13), &il) || il >= n_blocks) continue;
    const std::string suffix = name.substr(dot + 1);
    const std::string prefix = "blk." + std::to_string(il) + ".";
    const bool nextn = il >= n_layers_;
    if (suffix.starts_with("mlp.experts.")) {
      size_t d2 = suffix.find('.', 12);
      int64_t e = -1;
      if (d2 == std::string::npos || !ParseIndex(suffix.substr(12, d2 - 12), &e)) continue;
      const std::string proj = suffix.substr(d2 + 1);
      if (proj != "gate_proj.weight" && proj != "up_proj.weight" && proj != "down_proj.weight") continue;
      if (e >= n_expert_) {
        return InvalidArgumentError("tensor '" + name + "' names expert " + std::to_string(e) + " of " +
                                    std::to_string(n_expert_));
      }
      experts[{il, proj}][e] = t;
      used_.insert(name);
      continue;
    }
    const bool kv_b = mla_ && suffix == "self_attn.kv_b_proj.weight";
    const std::string gguf = kv_b ? "attn_kv_b.weight" : LayerName(suffix, nextn);
    if (gguf.empty()) continue;
    used_.insert(name);
    TANDEM_ASSIGN_OR_RETURN(Src s, Resolve(*t));
    const std::string full = prefix + gguf;
    if (kv_b) {
      TANDEM_RETURN_IF_ERROR(SplitKvB(prefix, s));
    } else if (arch_ == "llama" && (suffix.starts_with("self_attn.q_proj.") || suffix.starts_with("self_attn.k_proj."))) {
      TANDEM_ASSIGN_OR_RETURN(Src p, Permuted(s, suffix.starts_with("self_attn.q_proj.") ? n_head_ : n_head_kv_));
      TANDEM_RETURN_IF_ERROR(Emit(full, p));
    } else if (gguf == "ffn_gate_inp.weight" || gguf == "indexer.proj.weight") {
      ++widened_;
      TANDEM_RETURN_IF_ERROR(Emit(full, AsF32(s, 0.0f)));  // the converter writes these as F32
    } else if (norm_shift != 0 && gguf.ends_with("norm.weight")) {
      ++shifted_;
      TANDEM_RETURN_IF_ERROR(Emit(full, AsF32(s, norm_shift)));
    } else {
      TANDEM_RETURN_IF_ERROR(Emit(full, s));
    }
  }
  for (const auto& [key, by_expert] : experts) {
    const auto& [il, proj] = key;
    std::vector<Src> parts;
    for (int64_t e = 0; e < n_expert_; ++e) {
      auto it = by_expert.find(e);
      if (it == by_expert.end()) {
        return NotFoundError(dir_.string() + ": the checkpoint lacks model.layers." + std::to_string(il) +
                             ".mlp.experts." + std::to_string(e) + "." + proj);
      }
      TANDEM_ASSIGN_OR_RETURN(Src s, Resolve(*it->second));
      parts.push_back(std::move(s));
    }
    const std::string gguf = "blk." + std::to_string(il) + ".ffn_" + proj.substr(0, proj.find('_')) + "_exps.weight";
    TANDEM_RETURN_IF_ERROR(Stacked(gguf, parts));
  }
  for (const auto& [name, t] : hf_) {
    if (!used_.count(name)) c_->unused_.push_back(name);
  }
  auto say = [&](int n, const std::string& what) {
    if (n > 0) c_->conversions_.push_back(std::to_string(n) + " " + what);
  };
  say(permuted_, "q/k tensors with rows permuted (HF rotates half-and-half, llama's GGUF RoPE adjacent pairs)");
  say(shifted_, "Gemma norms stored as 1 + w in F32 (Gemma's RMSNorm multiplies by 1 + w)");
  if (stacked_ > 0) {
    say(stacked_, "per-expert groups stacked into 3-D tensors (" + std::to_string(stacked_bytes_ / 1000000) +
                      " MB copied: the kernels read an expert stack as one tensor)");
  }
  say(split_, "kv_b_proj tensors split into k_b / v_b for absorbed MLA");
  say(widened_, "router / indexer weights widened to F32 (as the converter writes them)");
  say(int8_dynamic_, "int8 matrices used in place with per-channel scales (W8A8, tokens quantized per row)");
  say(int8_static_, "int8 matrices used in place with static activation scales (msmodelslim W8A8)");
  say(fp8_, "FP8 block-scaled matrices dequantized to Q8_0 (F32 where a row is not whole 32-value blocks)");
  return Status::Ok();
}

bool HfCheckpointBuilder::ParseIndex(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    return false;
  }
  *out = std::stoll(s);
  return true;
}
}  // namespace tandem
