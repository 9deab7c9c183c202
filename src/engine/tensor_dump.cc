#include "engine/tensor_dump.h"

#include <fstream>

#include "model/forward.h"
#include "model/kv_store.h"

namespace tandem {

std::string NpyFloat32(const float* data, int64_t rows, int64_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple
  // of 64 bytes and ended by a newline.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(rows * cols) * sizeof(float));
  return out;
}

Status DumpTensors(const Model& model, ThreadPool* pool, const std::vector<int32_t>& tokens,
                   const TensorDumpOptions& options, const std::string& dir, std::vector<std::string>* written) {
  const ModelConfig& c = model.config();
  if (tokens.empty()) return InvalidArgumentError("no tokens to run");
  for (int32_t t : tokens) {
    if (t < 0 || t >= c.n_vocab) {
      return InvalidArgumentError("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                                  std::to_string(c.n_vocab - 1) + ")");
    }
  }
  TANDEM_RETURN_IF_ERROR(c.CheckKvDtype(options.kv_dtype));
  const int64_t n = static_cast<int64_t>(tokens.size());
  ContiguousKvStore kv(c.n_layers, n, c.KeyRowBytes(options.kv_dtype), c.ValueRowBytes(options.kv_dtype),
                       options.kv_dtype);
  Forward forward(c, model.weights(), pool);
  Status status;
  std::vector<std::string> names;
  const Forward::TensorTrace trace = [&](const std::string& name, const float* rows, int64_t n_rows,
                                         int64_t width) {
    bool keep = options.prefixes.empty();
    for (const std::string& p : options.prefixes) keep = keep || name.rfind(p, 0) == 0;
    if (!keep || !status.ok()) return;
    const std::string path = dir + "/" + name + ".npy";
    std::ofstream out(path, std::ios::binary);
    out << NpyFloat32(rows, n_rows, width);
    if (!out) {
      status = InternalError("cannot write " + path);
      return;
    }
    names.push_back(name);
  };
  forward.set_tensor_trace(&trace);
  ForwardSequence s;
  s.tokens = tokens.data();
  s.n_tokens = static_cast<int>(n);
  s.kv = &kv;
  s.all_logits = true;
  std::vector<float> logits;
  forward.Run({s}, &logits);
  TANDEM_RETURN_IF_ERROR(status);
  if (names.empty()) return InvalidArgumentError("no traced tensor starts with the prefixes given");
  std::ofstream ids(dir + "/tokens.txt");
  for (int64_t i = 0; i < n; ++i) ids << (i > 0 ? "," : "") << tokens[i];
  ids << "\n";
  if (!ids) return InternalError("cannot write " + dir + "/tokens.txt");
  if (written != nullptr) *written = std::move(names);
  return Status::Ok();
}

}  // namespace tandem
