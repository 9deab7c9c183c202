#include "kernels/isa.h"

#include <algorithm>
#include <cstdlib>

#include "common/logging.h"
#include "kernels/cpu_features.h"
#include "kernels/q0_gemm.h"

namespace tandem {

const char* IsaLevelName(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar:
      return "scalar";
    case IsaLevel::kAvx2:
      return "avx2";
    case IsaLevel::kAvx512:
      return "avx512";
    case IsaLevel::kAmx:
      return "amx";
  }
  return "?";
}

std::optional<IsaLevel> ParseIsaLevel(std::string_view name) {
  for (IsaLevel l : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAmx}) {
    if (name == IsaLevelName(l)) return l;
  }
  return std::nullopt;
}

IsaLevel CpuIsaLevel() {
  const CpuFeatures& f = GetCpuFeatures();
  if (!(f.avx2 && f.fma && f.f16c)) return IsaLevel::kScalar;
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni) return IsaLevel::kAvx512;
  return IsaLevel::kAvx2;
}

IsaLevel ChooseIsaLevel(IsaLevel cpu, std::string_view cap, std::string* warning) {
  IsaLevel best = std::min(cpu, kBestKernelIsaLevel);
  if (cap.empty()) return best;
  std::optional<IsaLevel> want = ParseIsaLevel(cap);
  if (!want) {
    *warning = "TANDEM_ISA=" + std::string(cap) + " is not one of scalar, avx2, avx512, amx; using " +
               IsaLevelName(best);
    return best;
  }
  if (*want > best) {
    *warning = "TANDEM_ISA=" + std::string(cap) + ": " +
               (*want > cpu ? "this CPU lacks it" : "no kernels for it in this build") + "; using " +
               IsaLevelName(best);
    return best;
  }
  return *want;
}

IsaLevel KernelIsaLevel() {
  static const IsaLevel level = [] {
    const char* cap = std::getenv("TANDEM_ISA");
    std::string warning;
    const IsaLevel l = ChooseIsaLevel(CpuIsaLevel(), cap != nullptr ? cap : "", &warning);
    if (!warning.empty()) TANDEM_LOG(WARNING) << warning;
    return l;
  }();
  return level;
}

bool KernelUsesVnni() {
  static const bool vnni = KernelIsaLevel() >= IsaLevel::kAvx512 ||
                           (KernelIsaLevel() == IsaLevel::kAvx2 && GetCpuFeatures().avx_vnni);
  return vnni;
}

std::string KernelIsaName() {
  switch (KernelIsaLevel()) {
    case IsaLevel::kScalar:
      return "scalar";
    case IsaLevel::kAvx2:
      return KernelUsesVnni() ? "avx2-vnni" : "avx2";
    default:
      return "avx512-vnni";
  }
}

std::string KernelIsaReport() {
  const CpuFeatures& f = GetCpuFeatures();
  std::string cpu;
  auto add = [&](bool has, const char* name) {
    if (!has) return;
    if (!cpu.empty()) cpu += ' ';
    cpu += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx512bf16, "avx512bf16");
  add(f.avx_vnni, "avxvnni");
  add(f.amx_int8, "amx-int8");
  add(f.amx_bf16, "amx-bf16");
  const char* cap = std::getenv("TANDEM_ISA");
  return KernelIsaName() + " (cpu: " + (cpu.empty() ? "no vector extensions" : cpu) +
         "; TANDEM_ISA" + (cap != nullptr ? std::string("=") + cap : std::string(" unset")) +
         "; llama.cpp's summation order: " + LlamaCppOrderTypes() + ")";
}

}  // namespace tandem
