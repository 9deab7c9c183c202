// The int8 tile's kernel choice and dispatch (int8_tile.h): which kernel runs, and each
// public entry point sent to its scalar (int8_tile_scalar.cc), 256-bit
// (int8_tile_avx2.cc) or AVX-512 (int8_tile_avx512.cc) form. The layout and the prepared
// rows are in int8_tile_layout.cc, the load-time repacking in int8_tile_repack.cc.
#include "kernels/int8_tile.h"

#include <cstdint>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/int8_tile_internal.h"
#include "kernels/isa.h"

namespace tandem {

namespace {

// The 256-bit kernels' VNNI form for a (non-scalar) kernel: the avx512 level's 256-bit
// paths (one-token rows, the 4x2 tile) take vpdpbusd's EVEX encoding.
VnniForm FormOf(Int8Kernel kernel) {
  switch (kernel) {
    case Int8Kernel::kAvx512Vnni:
      return VnniForm::kEvex;
    case Int8Kernel::kAvxVnni:
      return VnniForm::kVex;
    default:
      return VnniForm::kNone;
  }
}

}  // namespace

const char* Int8KernelName(Int8Kernel kernel) {
  switch (kernel) {
    case Int8Kernel::kScalar:
      return "scalar";
    case Int8Kernel::kAvx2:
      return "avx2";
    case Int8Kernel::kAvxVnni:
      return "avx-vnni";
    case Int8Kernel::kAvx512Vnni:
      return "avx512-vnni";
  }
  return "?";
}

Int8Kernel ChosenInt8Kernel() {
  static const Int8Kernel kernel = [] {
    switch (KernelIsaLevel()) {
      case IsaLevel::kScalar:
        return Int8Kernel::kScalar;
      case IsaLevel::kAvx2:
        return KernelUsesVnni() ? Int8Kernel::kAvxVnni : Int8Kernel::kAvx2;
      default:
        return Int8Kernel::kAvx512Vnni;
    }
  }();
  return kernel;
}

std::vector<Int8Kernel> RunnableInt8Kernels() {
  std::vector<Int8Kernel> kernels{Int8Kernel::kScalar};
  if (CpuIsaLevel() >= IsaLevel::kAvx2) kernels.push_back(Int8Kernel::kAvx2);
  if (CpuIsaLevel() >= IsaLevel::kAvx2 && GetCpuFeatures().avx_vnni)
    kernels.push_back(Int8Kernel::kAvxVnni);
  if (CpuIsaLevel() >= IsaLevel::kAvx512) kernels.push_back(Int8Kernel::kAvx512Vnni);
  return kernels;
}

void DotTileRows(TensorType type, const void* w, int64_t row_bytes, int64_t rows,
                 const TileOperand* a, int n_tokens, int64_t n_pairs, float* y, int64_t y_stride,
                 Int8Kernel kernel) {
  const uint8_t* base = static_cast<const uint8_t*>(w);
  if (kernel == Int8Kernel::kScalar) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int t = 0; t < n_tokens; ++t) {
        y[t * y_stride + r] = DotTileRow(type, base + r * row_bytes, a[t], n_pairs, kernel);
      }
    }
    return;
  }
  // One token (decode) takes the 256-bit row path at every level: half a zmm would idle.
  if (kernel == Int8Kernel::kAvx512Vnni && n_tokens != 1) {
    return DotTileRowsAvx512(type, base, row_bytes, rows, a, n_tokens, n_pairs, y, y_stride);
  }
  DotTileRowsYmm(FormOf(kernel), type, base, row_bytes, rows, a, n_tokens, n_pairs, y, y_stride);
}

float DotTileRow(TensorType type, const void* w_row, const TileOperand& a, int64_t n_pairs,
                 Int8Kernel kernel) {
  if (kernel != Int8Kernel::kScalar) return DotTileRowYmm(FormOf(kernel), type, w_row, a, n_pairs);
  // Scalar: decode the row and run the tile's scalar arithmetic for it.
  thread_local std::vector<uint8_t> q;
  thread_local std::vector<float> d;
  q.resize(static_cast<size_t>(TileWeightRowBytes(type, 64 * n_pairs)));
  d.resize(static_cast<size_t>(8 * n_pairs));
  PrepareTileWeightRow(type, w_row, 64 * n_pairs, q.data(), d.data());
  const TileOperand w[4] = {{q.data(), d.data(), nullptr},
                            {q.data(), d.data(), nullptr},
                            {q.data(), d.data(), nullptr},
                            {q.data(), d.data(), nullptr}};
  const TileOperand act[2] = {a, a};
  float out[4][2];
  DotInt8Tile4x2Scalar(Int8TileOffset(type), w, act, n_pairs, out);
  return out[0][0];
}

void DotInt8Tile4x2(int offset, const TileOperand w[4], const TileOperand& a0,
                    const TileOperand& a1, int64_t n_pairs, float out[4][2], Int8Kernel kernel) {
  const TileOperand a[2] = {a0, a1};
  if (kernel == Int8Kernel::kScalar) return DotInt8Tile4x2Scalar(offset, w, a, n_pairs, out);
  DotInt8Tile4x2Ymm(FormOf(kernel), offset, w, a, n_pairs, out);
}

void DotInt8Tile4x4(int offset, const TileOperand w[4], const TileOperand a[4], int64_t n_pairs,
                    float out[4][4], Int8Kernel kernel) {
  if (kernel == Int8Kernel::kAvx512Vnni) return DotInt8Tile4x4Avx512(offset, w, a, n_pairs, out);
  for (int h = 0; h < 2; ++h) {
    float half[4][2];
    DotInt8Tile4x2(offset, w, a[2 * h], a[2 * h + 1], n_pairs, half, kernel);
    for (int r = 0; r < 4; ++r) {
      out[r][2 * h] = half[r][0];
      out[r][2 * h + 1] = half[r][1];
    }
  }
}

}  // namespace tandem
