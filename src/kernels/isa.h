// The instruction-set level the kernels run at, chosen once per process.
//
// Every kernel with a vector path asks KernelIsaLevel() (not the CPU flags) which path to
// take, so one knob selects them all: TANDEM_ISA=scalar|avx2|avx512|amx caps the level
// (tests run the scalar paths on an AVX2 machine this way). The level is the lowest of:
// what the CPU has, the cap, and the best level that has kernels here (avx2: the AVX-512,
// VNNI and AMX paths are not written yet). A cap the CPU or the kernels lack is warned
// about once and the best available level is used.
//
// Thread safety: immutable after the first call.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tandem {

enum class IsaLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };

// "scalar", "avx2", "avx512", "amx".
const char* IsaLevelName(IsaLevel level);
std::optional<IsaLevel> ParseIsaLevel(std::string_view name);

// The CPU's best level: avx2 needs AVX2 + FMA + F16C (and the OS saving ymm state),
// avx512 needs AVX-512 F + BW (and zmm state). AMX is not detected: using it needs the
// tile state requested from the kernel, which no kernel here does yet.
IsaLevel CpuIsaLevel();

// The best level with kernels in this build (avx2).
constexpr IsaLevel kBestKernelIsaLevel = IsaLevel::kAvx2;

// Chosen on first use from the CPU, kBestKernelIsaLevel and TANDEM_ISA.
IsaLevel KernelIsaLevel();

// One line for the start-up log: "avx2 (cpu: avx2 fma f16c avx512f ...; TANDEM_ISA unset)".
std::string KernelIsaReport();

// The choice KernelIsaLevel makes, for tests: `cap` is TANDEM_ISA's value (empty when
// unset); `*warning` gets the warning to log, if any.
IsaLevel ChooseIsaLevel(IsaLevel cpu, std::string_view cap, std::string* warning);

}  // namespace tandem
