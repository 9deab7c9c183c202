// Memory read bandwidth of this machine, measured: the figure a decode roofline divides
// by the weight bytes read per token (`tandem bench model`).
//
// Threads each sum their slice of one buffer far larger than the caches (AVX2 loads
// where the CPU has them, scalar otherwise); the best pass counts.
// Thread safety: each call allocates and touches its own buffer; calls may run at once,
// though they then measure each other.
#pragma once

#include <cstddef>

namespace tandem {

struct MemoryBandwidthOptions {
  int threads = 1;                          // >= 1
  size_t buffer_bytes = size_t{512} << 20;  // the buffer read per pass (>= 64 bytes)
  int passes = 5;                           // >= 1; the best one is reported
};

// Read bandwidth in GB/s (1e9 bytes per second): positive and finite. Allocates and
// faults in `buffer_bytes` before timing.
double MeasureReadBandwidthGbps(const MemoryBandwidthOptions& options);

}  // namespace tandem
