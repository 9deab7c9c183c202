#include "kernels/memory_bandwidth.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tandem {
namespace {

TEST(MemoryBandwidthTest, OneThreadGivesAPositiveFiniteFigure) {
  MemoryBandwidthOptions options;
  options.buffer_bytes = size_t{8} << 20;
  options.passes = 2;
  const double gbps = MeasureReadBandwidthGbps(options);
  EXPECT_TRUE(std::isfinite(gbps)) << gbps;
  EXPECT_GT(gbps, 0.0);
}

TEST(MemoryBandwidthTest, SlicesThatDoNotDivideEvenlyAndATinyBuffer) {
  // 3 threads over a buffer whose element count is not a multiple of 3 * 8, and a buffer
  // smaller than one 64-byte line per thread: every slice boundary case.
  MemoryBandwidthOptions odd;
  odd.threads = 3;
  odd.buffer_bytes = (size_t{1} << 20) + 8 * 13;
  odd.passes = 1;
  const double a = MeasureReadBandwidthGbps(odd);
  EXPECT_TRUE(std::isfinite(a) && a > 0) << a;

  MemoryBandwidthOptions tiny;
  tiny.threads = 4;
  tiny.buffer_bytes = 64;
  tiny.passes = 1;
  const double b = MeasureReadBandwidthGbps(tiny);
  EXPECT_TRUE(std::isfinite(b) && b > 0) << b;
}

}  // namespace
}  // namespace tandem
