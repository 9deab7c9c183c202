#include "model/weight_quantization.h"

#include <map>
#include <optional>
#include <set>

#include "common/thread_pool.h"
#include "kernels/dequant.h"
#include "kernels/int8_tile.h"

namespace tandem {
namespace {

// Rows handed to a pool thread at a time: enough work to amortize the hand-off.
constexpr int64_t kRowsPerChunk = 64;

bool IsFloatType(TensorType type) {
  return type == TensorType::kF32 || type == TensorType::kF16 || type == TensorType::kBF16;
}

struct RewriteStats {
  int matrices = 0;          // distinct matrices rewritten
  int64_t bytes_before = 0;  // their size as stored
  int64_t bytes_after = 0;   // their size rewritten (= storage's size)
};

// The load-time rewrite both RequantizeToQ8_0 and RepackForInt8Tile are: every distinct
// matrix of `weights` (keyed by its bytes, so a tied LM head is rewritten once) that
// `target(named_matrix)` gives a new type for (nullopt: left as stored; asked once per
// distinct matrix) is rewritten into *storage, allocated once so the pointers handed out
// stay valid, by `convert(from, out, out_row_bytes, row_begin, row_end)` (rows in
// parallel on `pool` if not null); then every entry that shared it points at the copy.
template <typename Target, typename Convert>
RewriteStats RewriteMatrices(ModelWeights* weights, std::vector<uint8_t>* storage, ThreadPool* pool,
                             Target target, Convert convert) {
  RewriteStats stats;
  std::vector<NamedMatrix> all = ListMatrices(weights);
  // Pass 1: what to rewrite, and the room it needs.
  std::map<const uint8_t*, std::pair<WeightMatrix, WeightMatrix>> plan;  // source -> from, to
  std::set<const uint8_t*> seen;
  for (const NamedMatrix& nm : all) {
    const WeightMatrix& m = *nm.matrix;
    if (!m.valid() || !seen.insert(m.data).second) continue;
    const std::optional<TensorType> type = target(nm);
    if (!type.has_value()) continue;
    WeightMatrix to = m;
    to.type = *type;
    to.row_bytes = *RowBytes(*type, m.cols);
    to.data = nullptr;
    plan.emplace(m.data, std::make_pair(m, to));
    ++stats.matrices;
    stats.bytes_before += m.rows * m.row_bytes;
    stats.bytes_after += m.rows * to.row_bytes;
  }
  storage->assign(static_cast<size_t>(stats.bytes_after), 0);

  // Pass 2: rewrite each planned matrix, then point every entry that shared it at the copy.
  int64_t offset = 0;
  for (auto& entry : plan) {
    const WeightMatrix& from = entry.second.first;
    WeightMatrix& to = entry.second.second;
    uint8_t* out = storage->data() + offset;
    to.data = out;
    offset += to.rows * to.row_bytes;
    if (pool == nullptr) {
      convert(from, out, to.row_bytes, 0, from.rows);
    } else {
      pool->ParallelFor(from.rows, kRowsPerChunk, [&](int, int64_t begin, int64_t end) {
        convert(from, out, to.row_bytes, begin, end);
      });
    }
  }
  for (const NamedMatrix& nm : all) {
    auto it = plan.find(nm.matrix->data);
    if (it != plan.end()) *nm.matrix = it->second.second;
  }
  return stats;
}

}  // namespace

StatusOr<WeightQuantization> ParseWeightQuantization(std::string_view value) {
  if (value == "w8a8") return WeightQuantization::kW8A8;
  if (value.empty() || value == "ascend") return WeightQuantization::kAsStored;
  return InvalidArgumentError("--quantization: unknown value '" + std::string(value) +
                              "' (accepted: " + kAcceptedQuantizations + ")");
}

RequantizeReport RequantizeToQ8_0(ModelWeights* weights, std::vector<uint8_t>* storage,
                                  ThreadPool* pool) {
  RequantizeReport report;
  auto target = [&](const NamedMatrix& nm) -> std::optional<TensorType> {
    if (!IsFloatType(nm.matrix->type)) return std::nullopt;
    if (nm.matrix->cols % kQk != 0) {
      report.skipped.push_back(nm.name);
      return std::nullopt;
    }
    return TensorType::kQ8_0;
  };
  auto convert = [](const WeightMatrix& from, uint8_t* out, int64_t out_row_bytes, int64_t begin,
                    int64_t end) {
    std::vector<float> row(static_cast<size_t>(from.cols));  // [cols] one dequantized row
    for (int64_t r = begin; r < end; ++r) {
      DequantizeRow(from.type, from.data + r * from.row_bytes, row.data(), from.cols);
      QuantizeRowQ8_0(row.data(), out + r * out_row_bytes, from.cols);
    }
  };
  const RewriteStats stats = RewriteMatrices(weights, storage, pool, target, convert);
  report.matrices = stats.matrices;
  report.bytes_before = stats.bytes_before;
  report.bytes_after = stats.bytes_after;
  return report;
}

RepackReport RepackForInt8Tile(ModelWeights* weights, std::vector<uint8_t>* storage,
                               ThreadPool* pool) {
  auto target = [](const NamedMatrix& nm) -> std::optional<TensorType> {
    const WeightMatrix& m = *nm.matrix;
    if (TileRepackedType(m.type) == m.type || m.cols % 64 != 0) return std::nullopt;
    // Routed experts stay in the mapped file: a copy would read every expert at start
    // (most of a sparse model, which may exceed memory); the file layout gives the same bits.
    if (nm.name.find("_exps.") != std::string::npos) return std::nullopt;
    return TileRepackedType(m.type);
  };
  auto convert = [](const WeightMatrix& from, uint8_t* out, int64_t out_row_bytes, int64_t begin,
                    int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      RepackRowForTile(from.type, from.data + r * from.row_bytes, from.cols,
                       out + r * out_row_bytes);
    }
  };
  const RewriteStats stats = RewriteMatrices(weights, storage, pool, target, convert);
  return RepackReport{stats.matrices, stats.bytes_before};
}

}  // namespace tandem
