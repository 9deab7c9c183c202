#include "model/weight_quantization.h"

#include <map>
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
  std::vector<NamedMatrix> all = ListMatrices(weights);
  // Pass 1: the distinct float matrices to convert (keyed by their bytes, so a tied LM
  // head is converted once) and the room they need, so `storage` is allocated once
  // and the pointers handed out below stay valid.
  std::map<const uint8_t*, int64_t> offset_of;  // source data -> offset in storage
  std::set<const uint8_t*> skipped;             // source data left as stored
  int64_t total_bytes = 0;
  for (const NamedMatrix& nm : all) {
    const WeightMatrix& m = *nm.matrix;
    if (!m.valid() || !IsFloatType(m.type) || offset_of.count(m.data) != 0 ||
        skipped.count(m.data) != 0) {
      continue;
    }
    if (m.cols % kQk != 0) {
      skipped.insert(m.data);
      report.skipped.push_back(nm.name);
      continue;
    }
    offset_of[m.data] = total_bytes;
    total_bytes += m.rows * *RowBytes(TensorType::kQ8_0, m.cols);
    ++report.matrices;
    report.bytes_before += m.rows * m.row_bytes;
  }
  report.bytes_after = total_bytes;
  storage->assign(static_cast<size_t>(total_bytes), 0);

  // Pass 2: convert each distinct matrix, then point every entry that shared it at the copy.
  std::map<const uint8_t*, WeightMatrix> converted;  // source data -> its Q8_0 matrix
  for (const NamedMatrix& nm : all) {
    WeightMatrix& m = *nm.matrix;
    auto offset = offset_of.find(m.data);
    if (offset == offset_of.end()) continue;
    auto done = converted.find(m.data);
    if (done == converted.end()) {
      WeightMatrix q;
      q.type = TensorType::kQ8_0;
      q.rows = m.rows;
      q.cols = m.cols;
      q.row_bytes = *RowBytes(TensorType::kQ8_0, m.cols);
      uint8_t* out = storage->data() + offset->second;
      q.data = out;
      auto rows = [&](int64_t begin, int64_t end) {
        std::vector<float> row(static_cast<size_t>(m.cols));  // [cols] one dequantized row
        for (int64_t r = begin; r < end; ++r) {
          DequantizeRow(m.type, m.data + r * m.row_bytes, row.data(), m.cols);
          QuantizeRowQ8_0(row.data(), out + r * q.row_bytes, m.cols);
        }
      };
      if (pool == nullptr) {
        rows(0, m.rows);
      } else {
        pool->ParallelFor(m.rows, kRowsPerChunk,
                          [&](int, int64_t begin, int64_t end) { rows(begin, end); });
      }
      done = converted.emplace(m.data, q).first;
    }
    m = done->second;
  }
  return report;
}

RepackReport RepackForInt8Tile(ModelWeights* weights, std::vector<uint8_t>* storage,
                               ThreadPool* pool) {
  RepackReport report;
  std::vector<NamedMatrix> all = ListMatrices(weights);
  // Pass 1, as in RequantizeToQ8_0: the distinct matrices and the room they need.
  std::map<const uint8_t*, int64_t> offset_of;  // source data -> offset in storage
  int64_t total_bytes = 0;
  for (const NamedMatrix& nm : all) {
    const WeightMatrix& m = *nm.matrix;
    if (!m.valid() || TileRepackedType(m.type) == m.type || m.cols % 64 != 0 ||
        offset_of.count(m.data) != 0) {
      continue;
    }
    offset_of[m.data] = total_bytes;
    total_bytes += m.rows * m.row_bytes;
    ++report.matrices;
  }
  report.bytes = total_bytes;
  storage->assign(static_cast<size_t>(total_bytes), 0);

  // Pass 2: repack each distinct matrix, then point every entry that shared it at the copy.
  std::map<const uint8_t*, WeightMatrix> repacked;  // source data -> its repacked matrix
  for (const NamedMatrix& nm : all) {
    WeightMatrix& m = *nm.matrix;
    auto offset = offset_of.find(m.data);
    if (offset == offset_of.end()) continue;
    auto done = repacked.find(m.data);
    if (done == repacked.end()) {
      WeightMatrix q = m;
      q.type = TileRepackedType(m.type);
      uint8_t* out = storage->data() + offset->second;
      q.data = out;
      auto rows = [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          RepackRowForTile(m.type, m.data + r * m.row_bytes, m.cols, out + r * m.row_bytes);
        }
      };
      if (pool == nullptr) {
        rows(0, m.rows);
      } else {
        pool->ParallelFor(m.rows, kRowsPerChunk,
                          [&](int, int64_t begin, int64_t end) { rows(begin, end); });
      }
      done = repacked.emplace(m.data, q).first;
    }
    m = done->second;
  }
  return report;
}

}  // namespace tandem
