// Runtime CPU feature detection (CPUID), read once.
// Thread safety: immutable after first use.
#pragma once

namespace tandem {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avx_vnni = false;
  bool amx_int8 = false;
  bool amx_bf16 = false;
};

const CpuFeatures& GetCpuFeatures();

}  // namespace tandem
