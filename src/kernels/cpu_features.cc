#include "kernels/cpu_features.h"

#include <cpuid.h>

namespace tandem {
namespace {

CpuFeatures Detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    f.fma = (c >> 12) & 1;
    f.f16c = (c >> 29) & 1;
  }
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = (b >> 5) & 1;
    f.avx512f = (b >> 16) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.avx512vnni = (c >> 11) & 1;
    f.amx_bf16 = (d >> 22) & 1;
    f.amx_int8 = (d >> 25) & 1;
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avx_vnni = (a >> 4) & 1;
    f.avx512bf16 = (a >> 5) & 1;
  }
  // The OS must save the wide registers too (XCR0), else the instructions fault.
  if (f.avx2) {
    unsigned lo = 0, hi = 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    bool ymm = (lo & 0x6) == 0x6;
    bool zmm = (lo & 0xe6) == 0xe6;
    if (!ymm) f.avx2 = f.fma = f.f16c = f.avx_vnni = false;
    if (!zmm) f.avx512f = f.avx512bw = f.avx512vl = f.avx512vnni = f.avx512bf16 = false;
  }
  return f;
}

}  // namespace

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

}  // namespace tandem
