#include "kernels/isa.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace tandem {
namespace {

TEST(IsaTest, TheCapSelectsALevelTheCpuAndTheKernelsHave) {
  std::string w;
  EXPECT_EQ(ChooseIsaLevel(IsaLevel::kAvx2, "", &w), IsaLevel::kAvx2);
  EXPECT_EQ(ChooseIsaLevel(IsaLevel::kAvx2, "scalar", &w), IsaLevel::kScalar);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(ChooseIsaLevel(IsaLevel::kAvx512, "", &w), IsaLevel::kAvx512);
  EXPECT_EQ(ChooseIsaLevel(IsaLevel::kAvx512, "avx2", &w), IsaLevel::kAvx2);
  EXPECT_TRUE(w.empty());
  // No AMX kernels yet: a cap of amx on an AMX CPU runs the avx512 ones, with a warning.
  EXPECT_EQ(ChooseIsaLevel(IsaLevel::kAmx, "amx", &w), IsaLevel::kAvx512);
  EXPECT_NE(w.find("no kernels"), std::string::npos) << w;
  w.clear();
  EXPECT_EQ(ChooseIsaLevel(IsaLevel::kAvx2, "avx512", &w), IsaLevel::kAvx2);
  EXPECT_NE(w.find("lacks"), std::string::npos) << w;
  w.clear();
  // A level the CPU lacks: warned, the best available.
  EXPECT_EQ(ChooseIsaLevel(IsaLevel::kScalar, "avx2", &w), IsaLevel::kScalar);
  EXPECT_NE(w.find("lacks"), std::string::npos) << w;
  w.clear();
  EXPECT_EQ(ChooseIsaLevel(IsaLevel::kAvx2, "sse9", &w), IsaLevel::kAvx2);
  EXPECT_NE(w.find("not one of"), std::string::npos) << w;
  EXPECT_EQ(ParseIsaLevel("amx"), IsaLevel::kAmx);
  EXPECT_FALSE(ParseIsaLevel("AVX2").has_value());
}

// ctest runs kernels_test twice: at the machine's level and with TANDEM_ISA=scalar, so the
// portable paths run even here. This says which level this run exercised.
TEST(IsaTest, PrintsTheLevelThisRunExercises) {
  std::printf("kernels_test ISA level: %s\n", KernelIsaReport().c_str());
  EXPECT_LE(KernelIsaLevel(), CpuIsaLevel());
  EXPECT_LE(KernelIsaLevel(), kBestKernelIsaLevel);
  EXPECT_EQ(KernelIsaReport().rfind(KernelIsaName(), 0), 0u) << KernelIsaReport();
  if (KernelIsaLevel() == IsaLevel::kAvx512) {
    EXPECT_TRUE(KernelUsesVnni());
  }
  if (KernelIsaLevel() == IsaLevel::kScalar) {
    EXPECT_FALSE(KernelUsesVnni());
  }
}

}  // namespace
}  // namespace tandem
