// The instruction-set level the kernels run at, chosen once per process.
//
// Every kernel with a vector path asks KernelIsaLevel() (not the CPU flags) which path to
// take, so one knob selects them all: TANDEM_ISA=scalar|avx2|avx512|amx caps the level
// (tests run the scalar paths on an AVX2 machine this way). The level is the lowest of:
// what the CPU has, the cap, and the best level that has kernels here (avx512: no AMX
// kernels are written yet). A cap the CPU or the kernels lack is warned about once and
// the best available level is used.
//
// Within a level the int8 dot products use VNNI where the CPU has it: `vpdpbusd` in its
// 256-bit VEX form (AVX-VNNI) at the avx2 level, in its EVEX forms at the avx512 level
// (which requires AVX-512 VNNI). Either gives the same integers as `vpmaddubsw` +
// `vpmaddwd`, so every level gives the same bits for the integer dots.
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
// avx512 needs AVX-512 F + BW + VL + VNNI (and zmm state). AMX is not reported as a
// level: no kernel here uses its tiles yet.
IsaLevel CpuIsaLevel();

// The best level with kernels in this build.
constexpr IsaLevel kBestKernelIsaLevel = IsaLevel::kAvx512;

// Whether the int8 dots at KernelIsaLevel() use VNNI: always at avx512, at avx2 where
// the CPU has AVX-VNNI.
bool KernelUsesVnni();

// The kernels in use, as the start-up log and `tandem bench model` name them: "scalar",
// "avx2", "avx2-vnni", "avx512-vnni".
std::string KernelIsaName();

// Chosen on first use from the CPU, kBestKernelIsaLevel and TANDEM_ISA.
IsaLevel KernelIsaLevel();

// One line for the start-up log:
// "avx512-vnni (cpu: avx2 fma f16c avx512f ...; TANDEM_ISA unset)".
std::string KernelIsaReport();

// The choice KernelIsaLevel makes, for tests: `cap` is TANDEM_ISA's value (empty when
// unset); `*warning` gets the warning to log, if any.
IsaLevel ChooseIsaLevel(IsaLevel cpu, std::string_view cap, std::string* warning);

}  // namespace tandem
