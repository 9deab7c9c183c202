#include "kernels_bench_util.h"

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#include "common/logging.h"
#include "common/thread_pool.h"
#include "kernels/half.h"
#include "kernels/int8_tile.h"

namespace tandem::bench {
namespace {

// SplitMix64: fast enough to fill the 178 MB LM head in a fraction of a second
// (std::mt19937 takes several).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  float Uniform() { return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f); }

 private:
  uint64_t state_;
};

// Byte offsets of the fp16 scale fields (d, and dmin where the type has one) in a block.
std::vector<int64_t> ScaleFieldOffsets(TensorType type) {
  switch (type) {
    case TensorType::kQ4_1:
    case TensorType::kQ5_1:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
      return {0, 2};
    case TensorType::kQ2_K:
      return {80, 82};
    case TensorType::kQ3_K:
      return {108};
    case TensorType::kQ6_K:
      return {208};
    default:
      return {0};
  }
}

}  // namespace

std::vector<uint8_t> RandomWeights(TensorType type, int64_t rows, int64_t cols, uint64_t seed) {
  const std::optional<int64_t> row_bytes = RowBytes(type, cols);
  TANDEM_CHECK(row_bytes.has_value()) << TypeName(type) << " cannot hold rows of " << cols;
  const int64_t n_values = rows * cols;
  std::vector<uint8_t> out(static_cast<size_t>(rows * *row_bytes));
  if (type == TensorType::kQ5_0x2 || type == TensorType::kQ4_0x2) {  // repacked file rows
    const TensorType file_type =
        type == TensorType::kQ5_0x2 ? TensorType::kQ5_0 : TensorType::kQ4_0;
    const std::vector<uint8_t> stored = RandomWeights(file_type, rows, cols, seed);
    for (int64_t r = 0; r < rows; ++r) {
      RepackRowForTile(file_type, stored.data() + r * *row_bytes, cols,
                       out.data() + r * *row_bytes);
    }
    return out;
  }
  Rng rng(seed);
  switch (type) {
    case TensorType::kF32: {
      auto* v = reinterpret_cast<float*>(out.data());
      for (int64_t i = 0; i < n_values; ++i) v[i] = 2.0f * rng.Uniform() - 1.0f;
      return out;
    }
    case TensorType::kF16:
    case TensorType::kBF16: {
      auto* v = reinterpret_cast<uint16_t*>(out.data());
      for (int64_t i = 0; i < n_values; ++i) {
        const float f = 2.0f * rng.Uniform() - 1.0f;
        v[i] = type == TensorType::kF16 ? Fp32ToFp16(f) : Fp32ToBf16(f);
      }
      return out;
    }
    default:
      break;
  }
  for (size_t i = 0; i + 8 <= out.size(); i += 8) {
    const uint64_t r = rng.Next();
    std::memcpy(&out[i], &r, 8);
  }
  for (size_t i = out.size() / 8 * 8; i < out.size(); ++i)
    out[i] = static_cast<uint8_t>(rng.Next());
  const int64_t block_bytes = TraitsOf(type).block_bytes;
  const std::vector<int64_t> fields = ScaleFieldOffsets(type);
  for (size_t off = 0; off < out.size(); off += static_cast<size_t>(block_bytes)) {
    for (int64_t f : fields) {
      const Fp16Bits d = Fp32ToFp16(0.001f + 0.049f * rng.Uniform());
      std::memcpy(&out[off + static_cast<size_t>(f)], &d, sizeof(d));
    }
  }
  return out;
}

const std::vector<uint8_t>& CachedWeights(TensorType type, int64_t rows, int64_t cols) {
  static std::map<std::tuple<TensorType, int64_t, int64_t>, std::unique_ptr<std::vector<uint8_t>>>
      cache;
  auto& slot = cache[{type, rows, cols}];
  if (slot == nullptr) {
    slot = std::make_unique<std::vector<uint8_t>>(
        RandomWeights(type, rows, cols,
                      static_cast<uint64_t>(rows * 131 + cols * 7 + static_cast<int64_t>(type))));
  }
  return *slot;
}

std::vector<float> RandomFloats(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> out(static_cast<size_t>(n));
  // Box-Muller; the second value of each pair is dropped (setup cost only).
  for (float& v : out) {
    const float u1 = 1.0f - rng.Uniform();  // (0, 1]
    const float u2 = rng.Uniform();
    v = std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
  }
  return out;
}

std::string TypeName(TensorType type) { return std::string(TraitsOf(type).name); }

void RunMatMul(benchmark::State& state, const WeightMatrix& w, int64_t n_tokens, int threads) {
  const std::vector<float> x = RandomFloats(n_tokens * w.cols, 7);  // [n_tokens, cols]
  std::vector<float> y(static_cast<size_t>(n_tokens * w.rows));     // [n_tokens, rows]
  ThreadPool pool(threads);
  for (auto _ : state) {
    MatMul(w, x.data(), n_tokens, y.data(), &pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  if (n_tokens == 1) {
    SetBytesRate(state, static_cast<double>(w.rows * w.row_bytes));
  } else {
    SetFlopRate(state, 2.0 * static_cast<double>(w.rows * w.cols * n_tokens));
  }
}

}  // namespace tandem::bench
