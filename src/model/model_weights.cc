#include "model/model_weights.h"

#include "kernels/dequant.h"
#include "model/gguf_file.h"

namespace tandem {
namespace {

// Collects binding errors so one message can list every missing tensor.
class Binder {
 public:
  explicit Binder(const GgufFile& file) : file_(file) {}

  // A matrix of shape [rows, cols] (GGUF dims {cols, rows}).
  WeightMatrix Matrix(const std::string& name, int64_t rows, int64_t cols) {
    const GgufTensorInfo* t = Lookup(name);
    if (t == nullptr) return {};
    if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
      Mismatch(name, t, "[" + std::to_string(cols) + ", " + std::to_string(rows) + "]");
      return {};
    }
    if (!CanDequantize(t->type)) {
      bad_ += "tensor '" + name + "' has type " + std::string(TraitsOf(t->type).name) +
              " which Tandem cannot compute with; ";
      return {};
    }
    WeightMatrix m;
    m.type = t->type;
    m.data = t->data;
    m.rows = rows;
    m.cols = cols;
    m.row_bytes = *RowBytes(t->type, cols);
    return m;
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
  void Mismatch(const std::string& name, const GgufTensorInfo* t, const std::string& want) {
    std::string got = "[";
    for (size_t i = 0; i < t->dims.size(); ++i) got += (i ? ", " : "") + std::to_string(t->dims[i]);
    bad_ += "tensor '" + name + "' has shape " + got + "], expected " + want + "; ";
  }

  const GgufFile& file_;
  std::string missing_;
  std::string bad_;
};

}  // namespace

std::vector<NamedMatrix> ListMatrices(ModelWeights* w) {
  std::vector<NamedMatrix> out = {{"token_embd.weight", &w->tok_embd},
                                  {"output.weight", &w->output}};
  for (size_t il = 0; il < w->layers.size(); ++il) {
    LayerWeights& l = w->layers[il];
    const std::string p = "blk." + std::to_string(il) + ".";
    for (auto [name, m] : {std::pair<const char*, WeightMatrix*>{"attn_q", &l.wq},
                           {"attn_k", &l.wk},
                           {"attn_v", &l.wv},
                           {"attn_output", &l.wo},
                           {"ffn_gate", &l.ffn_gate},
                           {"ffn_up", &l.ffn_up},
                           {"ffn_down", &l.ffn_down}}) {
      out.push_back({p + name + ".weight", m});
    }
  }
  return out;
}

StatusOr<ModelWeights> BindWeights(const GgufFile& file, const ModelConfig& c) {
  Binder b(file);
  ModelWeights w;
  w.tok_embd = b.Matrix("token_embd.weight", c.n_vocab, c.n_embd);
  w.output_norm = b.Vector("output_norm.weight", c.n_embd);
  w.output = c.tied_output ? w.tok_embd : b.Matrix("output.weight", c.n_vocab, c.n_embd);
  w.layers.resize(c.n_layers);
  for (int il = 0; il < c.n_layers; ++il) {
    LayerWeights& l = w.layers[il];
    const std::string p = "blk." + std::to_string(il) + ".";
    l.attn_norm = b.Vector(p + "attn_norm.weight", c.n_embd);
    l.wq = b.Matrix(p + "attn_q.weight", c.q_dim(), c.n_embd);
    l.wk = b.Matrix(p + "attn_k.weight", c.kv_dim(), c.n_embd);
    l.wv = b.Matrix(p + "attn_v.weight", c.v_dim(), c.n_embd);
    l.wo = b.Matrix(p + "attn_output.weight", c.n_embd, c.q_dim());
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
    l.ffn_norm = b.Vector(p + "ffn_norm.weight", c.n_embd);
    l.ffn_gate = b.Matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd);
    l.ffn_up = b.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd);
    l.ffn_down = b.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff);
  }
  TANDEM_RETURN_IF_ERROR(b.Finish());
  return w;
}

}  // namespace tandem
