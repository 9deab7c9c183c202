#include "model/model_weights.h"

#include "kernels/dequant.h"
#include "model/model_source.h"

namespace tandem {
namespace {

// Collects binding errors so one message can list every missing tensor.
class Binder {
 public:
  explicit Binder(const ModelSource& file) : file_(file) {}

  // A matrix of shape [rows, cols] (GGUF dims {cols, rows}).
  WeightMatrix Matrix(const std::string& name, int64_t rows, int64_t cols) {
    const GgufTensorInfo* t = Lookup(name);
    if (t == nullptr) return {};
    if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
      Mismatch(name, t, "[" + std::to_string(cols) + ", " + std::to_string(rows) + "]");
      return {};
    }
    if (!Computable(name, t)) return {};
    return View(t, rows, cols);
  }

  // An optional matrix: invalid when absent, checked like Matrix when present.
  WeightMatrix OptionalMatrix(const std::string& name, int64_t rows, int64_t cols) {
    return file_.FindTensor(name) != nullptr ? Matrix(name, rows, cols) : WeightMatrix{};
  }

  // A 3-D tensor of `count` matrices [rows, cols] (GGUF dims {cols, rows, count}).
  MatrixStack Stack(const std::string& name, int count, int64_t rows, int64_t cols) {
    const GgufTensorInfo* t = Lookup(name);
    if (t == nullptr) return {};
    if (t->dims.size() != 3 || t->dims[0] != cols || t->dims[1] != rows || t->dims[2] != count) {
      Mismatch(name, t, "[" + std::to_string(cols) + ", " + std::to_string(rows) + ", " +
                            std::to_string(count) + "] (cols, rows, count)");
      return {};
    }
    if (!Computable(name, t)) return {};
    MatrixStack e;
    e.all = View(t, rows * count, cols);
    e.count = count;
    e.rows_each = rows;
    return e;
  }

  std::vector<float> Vector(const std::string& name, int64_t n, bool optional = false) {
    const GgufTensorInfo* t = optional ? file_.FindTensor(name) : Lookup(name);
    if (t == nullptr) return {};
    if (t->num_elements != n || t->dims.empty() || t->dims[0] != n) {
      Mismatch(name, t, "[" + std::to_string(n) + "]");
      return {};
    }
    if (!CanDequantize(t->type)) {
      bad_ += "tensor '" + name + "' has an unsupported type; ";
      return {};
    }
    std::vector<float> out(static_cast<size_t>(n));
    DequantizeRow(t->type, t->data, out.data(), n);
    return out;
  }

  Status Finish() const {
    if (!missing_.empty()) {
      return NotFoundError("model file lacks tensors: " + missing_ + "(architecture " +
                           file_.GetStringOr("general.architecture", "?").value() + ")");
    }
    if (!bad_.empty()) return InvalidArgumentError(bad_);
    return Status::Ok();
  }

 private:
  const GgufTensorInfo* Lookup(const std::string& name) {
    const GgufTensorInfo* t = file_.FindTensor(name);
    if (t == nullptr) missing_ += name + " ";
    return t;
  }
  // False (and the reason noted) for a type the kernels cannot compute with.
  bool Computable(const std::string& name, const GgufTensorInfo* t) {
    if (CanDequantize(t->type)) return true;
    if (t->type == TensorType::kI8Rows && t->i8 != nullptr) return true;  // W8A8 rows with their scales
    bad_ += "tensor '" + name + "' has type " + std::string(TraitsOf(t->type).name) +
            " which Tandem cannot compute with; ";
    return false;
  }
  // The tensor's data as `rows` rows of `cols` values (shape already checked).
  static WeightMatrix View(const GgufTensorInfo* t, int64_t rows, int64_t cols) {
    return WeightMatrix{t->type, t->data, rows, cols, *RowBytes(t->type, cols), t->i8};
  }
  void Mismatch(const std::string& name, const GgufTensorInfo* t, const std::string& want) {
    std::string got = "[";
    for (size_t i = 0; i < t->dims.size(); ++i) got += (i ? ", " : "") + std::to_string(t->dims[i]);
    bad_ += "tensor '" + name + "' has shape " + got + "], expected " + want + "; ";
  }

  const ModelSource& file_;
  std::string missing_;
  std::string bad_;
};

}  // namespace

namespace {

void ListLayerMatrices(const std::string& p, LayerWeights& l, std::vector<NamedMatrix>* out) {
  for (auto [name, m] : {std::pair<const char*, WeightMatrix*>{"attn_q", &l.wq},
                         {"attn_k", &l.wk},
                         {"attn_v", &l.wv},
                         {"attn_output", &l.wo},
                         {"attn_q_a", &l.mla.q_a},
                         {"attn_q_b", &l.mla.q_b},
                         {"attn_kv_a_mqa", &l.mla.kv_a},
                         {"attn_kv_b", &l.mla.kv_b},
                         {"attn_k_b", &l.mla.k_b.all},
                         {"attn_v_b", &l.mla.v_b.all},
                         {"ffn_gate", &l.ffn_gate},
                         {"ffn_up", &l.ffn_up},
                         {"ffn_down", &l.ffn_down},
                         {"ffn_gate_inp", &l.moe.router},
                         {"ffn_gate_exps", &l.moe.gate.all},
                         {"ffn_up_exps", &l.moe.up.all},
                         {"ffn_down_exps", &l.moe.down.all},
                         {"ffn_gate_shexp", &l.moe.shared_gate},
                         {"ffn_up_shexp", &l.moe.shared_up},
                         {"ffn_down_shexp", &l.moe.shared_down},
                         {"indexer.attn_q_b", &l.dsa.q_b},
                         {"indexer.attn_k", &l.dsa.k},
                         {"indexer.proj", &l.dsa.proj}}) {
    out->push_back({p + name + ".weight", m});
  }
}

void BindMla(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const MlaConfig& m = c.mla_dims;
  const int64_t q_head = m.qk_nope_dim + m.qk_rope_dim;
  MlaWeights& w = l.mla;
  if (m.q_lora_rank > 0) {
    w.q_a = b.Matrix(p + "attn_q_a.weight", m.q_lora_rank, c.n_embd);
    w.q_a_norm = b.Vector(p + "attn_q_a_norm.weight", m.q_lora_rank);
    w.q_b = b.Matrix(p + "attn_q_b.weight", c.n_heads * q_head, m.q_lora_rank);
  } else {
    l.wq = b.Matrix(p + "attn_q.weight", c.n_heads * q_head, c.n_embd);
  }
  w.kv_a = b.Matrix(p + "attn_kv_a_mqa.weight", m.kv_lora_rank + m.qk_rope_dim, c.n_embd);
  w.kv_a_norm = b.Vector(p + "attn_kv_a_norm.weight", m.kv_lora_rank);
  if (m.joint_kv_b) {
    w.kv_b = b.Matrix(p + "attn_kv_b.weight", static_cast<int64_t>(c.n_heads) * (m.qk_nope_dim + m.v_head_dim),
                      m.kv_lora_rank);
  } else {
    w.k_b = b.Stack(p + "attn_k_b.weight", c.n_heads, m.kv_lora_rank, m.qk_nope_dim);
    w.v_b = b.Stack(p + "attn_v_b.weight", c.n_heads, m.v_head_dim, m.kv_lora_rank);
  }
  l.wo = b.Matrix(p + "attn_output.weight", c.n_embd, static_cast<int64_t>(c.n_heads) * m.v_head_dim);
}

void BindIndexer(Binder& b, const ModelConfig& c, const std::string& p, DsaWeights& w) {
  const DsaConfig& d = c.dsa;
  w.q_b = b.Matrix(p + "indexer.attn_q_b.weight", static_cast<int64_t>(d.n_heads) * d.head_dim,
                   c.mla_dims.q_lora_rank);
  w.k = b.Matrix(p + "indexer.attn_k.weight", d.head_dim, c.n_embd);
  w.k_norm = b.Vector(p + "indexer.k_norm.weight", d.head_dim);
  w.k_norm_b = b.Vector(p + "indexer.k_norm.bias", d.head_dim);
  w.proj = b.Matrix(p + "indexer.proj.weight", d.n_heads, c.n_embd);
}

// Binds block `block`'s attention and FFN tensors (the FFN dense or MoE as `moe` says).
void BindLayer(Binder& b, const ModelConfig& c, int block, bool moe, LayerWeights& l) {
  const std::string p = "blk." + std::to_string(block) + ".";
  l.attn_norm = b.Vector(p + "attn_norm.weight", c.n_embd);
  if (c.mla) {
    BindMla(b, c, p, l);
  } else {
    l.wq = b.Matrix(p + "attn_q.weight", c.q_dim(), c.n_embd);
    l.wk = b.Matrix(p + "attn_k.weight", c.kv_dim(), c.n_embd);
    l.wv = b.Matrix(p + "attn_v.weight", c.v_dim(), c.n_embd);
    l.wo = b.Matrix(p + "attn_output.weight", c.n_embd, c.q_dim());
  }
  if (c.qkv_bias) {
    l.bq = b.Vector(p + "attn_q.bias", c.q_dim());
    l.bk = b.Vector(p + "attn_k.bias", c.kv_dim());
    l.bv = b.Vector(p + "attn_v.bias", c.v_dim());
  }
  if (c.qk_norm) {
    l.q_norm = b.Vector(p + "attn_q_norm.weight", c.head_dim);
    l.k_norm = b.Vector(p + "attn_k_norm.weight", c.head_dim);
  }
  if (c.post_norms) {
    l.attn_post_norm = b.Vector(p + "post_attention_norm.weight", c.n_embd);
    l.ffn_post_norm = b.Vector(p + "post_ffw_norm.weight", c.n_embd);
  }
  l.ffn_norm = b.Vector(p + c.ffn_norm_name + ".weight", c.n_embd);
  if (!moe) {
    l.ffn_gate = b.Matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd);
    l.ffn_up = b.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd);
    l.ffn_down = b.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff);
    return;
  }
  const MoeConfig& m = c.moe;
  MoeWeights& w = l.moe;
  w.router = b.Matrix(p + "ffn_gate_inp.weight", m.n_expert, c.n_embd);
  if (m.probs_bias) w.probs_bias = b.Vector(p + "exp_probs_b.bias", m.n_expert);
  w.gate = b.Stack(p + "ffn_gate_exps.weight", m.n_expert, m.n_ff_exp, c.n_embd);
  w.up = b.Stack(p + "ffn_up_exps.weight", m.n_expert, m.n_ff_exp, c.n_embd);
  w.down = b.Stack(p + "ffn_down_exps.weight", m.n_expert, c.n_embd, m.n_ff_exp);
  if (m.n_expert_shared > 0) {
    w.shared_gate = b.Matrix(p + "ffn_gate_shexp.weight", m.n_ff_shexp, c.n_embd);
    w.shared_up = b.Matrix(p + "ffn_up_shexp.weight", m.n_ff_shexp, c.n_embd);
    w.shared_down = b.Matrix(p + "ffn_down_shexp.weight", c.n_embd, m.n_ff_shexp);
  }
}

}  // namespace

std::vector<NamedMatrix> ListMatrices(ModelWeights* w) {
  std::vector<NamedMatrix> out = {{"token_embd.weight", &w->tok_embd},
                                  {"output.weight", &w->output}};
  for (size_t il = 0; il < w->layers.size(); ++il) {
    ListLayerMatrices("blk." + std::to_string(il) + ".", w->layers[il], &out);
  }
  for (size_t i = 0; i < w->nextn.size(); ++i) {
    const std::string p = "blk." + std::to_string(w->layers.size() + i) + ".";
    ListLayerMatrices(p, w->nextn_layers[i], &out);
    NextnWeights& n = w->nextn[i];
    out.push_back({p + "nextn.eh_proj.weight", &n.eh_proj});
    out.push_back({p + "nextn.embed_tokens.weight", &n.embed_tokens});
    out.push_back({p + "nextn.shared_head_head.weight", &n.shared_head_head});
  }
  return out;
}

StatusOr<ModelWeights> BindWeights(const ModelSource& file, const ModelConfig& c) {
  Binder b(file);
  ModelWeights w;
  w.tok_embd = b.Matrix("token_embd.weight", c.n_vocab, c.n_embd);
  w.output_norm = b.Vector("output_norm.weight", c.n_embd);
  w.output = c.tied_output ? w.tok_embd : b.Matrix("output.weight", c.n_vocab, c.n_embd);
  w.layers.resize(c.n_layers);
  for (int il = 0; il < c.n_layers; ++il) {
    BindLayer(b, c, il, c.layer_is_moe(il), w.layers[il]);
    // The NextN blocks' indexers are not used (llama.cpp's MTP head attends densely);
    // deepseek32's are bound below all the same, as llama.cpp requires them there.
    if (c.dsa.n_heads > 0 && c.dsa.layer_full[il]) {
      BindIndexer(b, c, "blk." + std::to_string(il) + ".", w.layers[il].dsa);
    }
  }
  // NextN blocks: a file may leave them out (llama.cpp's "trunk only" conversion), told
  // by the absence of the first block's eh_proj; when present, all of each is required.
  const bool has_nextn = c.n_nextn_layers > 0 &&
      file.FindTensor("blk." + std::to_string(c.n_layers) + ".nextn.eh_proj.weight") != nullptr;
  if (has_nextn) {
    w.nextn_layers.resize(c.n_nextn_layers);
    w.nextn.resize(c.n_nextn_layers);
    for (int i = 0; i < c.n_nextn_layers; ++i) {
      const int block = c.n_layers + i;
      BindLayer(b, c, block, c.layer_is_moe(block), w.nextn_layers[i]);
      if (c.arch == "deepseek32") BindIndexer(b, c, "blk." + std::to_string(block) + ".", w.nextn_layers[i].dsa);
      const std::string p = "blk." + std::to_string(block) + ".nextn.";
      NextnWeights& n = w.nextn[i];
      n.eh_proj = b.Matrix(p + "eh_proj.weight", c.n_embd, 2 * static_cast<int64_t>(c.n_embd));
      n.enorm = b.Vector(p + "enorm.weight", c.n_embd);
      n.hnorm = b.Vector(p + "hnorm.weight", c.n_embd);
      n.embed_tokens = b.OptionalMatrix(p + "embed_tokens.weight", c.n_vocab, c.n_embd);
      n.shared_head_head = b.OptionalMatrix(p + "shared_head_head.weight", c.n_vocab, c.n_embd);
      n.shared_head_norm = b.Vector(p + "shared_head_norm.weight", c.n_embd, /*optional=*/true);
    }
  }
  TANDEM_RETURN_IF_ERROR(b.Finish());
  return w;
}

void SplitMlaKvB(const ModelConfig& c, ModelWeights* weights, std::vector<uint8_t>* storage) {
  const MlaConfig& m = c.mla_dims;
  const int H = c.n_heads, nope = m.qk_nope_dim, vh = m.v_head_dim, lora = m.kv_lora_rank;
  const int64_t k_row_bytes = *RowBytes(TensorType::kQ8_0, nope);   // k_b rows: nope values
  const int64_t v_row_bytes = *RowBytes(TensorType::kQ8_0, lora);   // v_b rows: lora values
  const int64_t per_layer = static_cast<int64_t>(H) * (lora * k_row_bytes + vh * v_row_bytes);
  std::vector<LayerWeights*> layers;
  for (LayerWeights& l : weights->layers) layers.push_back(&l);
  for (LayerWeights& l : weights->nextn_layers) layers.push_back(&l);
  storage->assign(static_cast<size_t>(per_layer * static_cast<int64_t>(layers.size())), 0);
  uint8_t* out = storage->data();
  std::vector<float> rows(static_cast<size_t>(nope + vh) * lora);  // one head's kv_b rows
  std::vector<float> col(static_cast<size_t>(nope));
  for (LayerWeights* l : layers) {
    MlaWeights& w = l->mla;
    uint8_t* k_base = out;
    uint8_t* v_base = out + static_cast<int64_t>(H) * lora * k_row_bytes;
    for (int h = 0; h < H; ++h) {
      for (int r = 0; r < nope + vh; ++r) {
        GetRow(w.kv_b, static_cast<int64_t>(h) * (nope + vh) + r, &rows[static_cast<size_t>(r) * lora]);
      }
      // k_b[h] row j (j < kv_lora_rank) = column j of the head's nope K rows.
      for (int j = 0; j < lora; ++j) {
        for (int i = 0; i < nope; ++i) col[i] = rows[static_cast<size_t>(i) * lora + j];
        QuantizeRowQ8_0(col.data(), k_base + (static_cast<int64_t>(h) * lora + j) * k_row_bytes, nope);
      }
      for (int r = 0; r < vh; ++r) {
        QuantizeRowQ8_0(&rows[static_cast<size_t>(nope + r) * lora],
                        v_base + (static_cast<int64_t>(h) * vh + r) * v_row_bytes, lora);
      }
    }
    auto stack = [&](uint8_t* data, int64_t rows_each, int64_t cols, int64_t row_bytes) {
      MatrixStack s;
      s.all = WeightMatrix{TensorType::kQ8_0, data, rows_each * H, cols, row_bytes};
      s.count = H;
      s.rows_each = rows_each;
      return s;
    };
    w.k_b = stack(k_base, lora, nope, k_row_bytes);
    w.v_b = stack(v_base, vh, lora, v_row_bytes);
    out += per_layer;
  }
}

}  // namespace tandem
