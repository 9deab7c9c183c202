// Test-only helpers that locate generated fixtures (tools/make_fixtures.py output).
//
// Fixtures live in $TANDEM_FIXTURE_DIR if set, else $TANDEM_SOURCE_DIR/build/fixtures,
// else ./build/fixtures (tests run from the source root by default).
// Thread safety: reads the environment only; safe to call concurrently.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace tandem {

// Directory holding the generated fixtures, without a trailing slash.
inline std::string FixtureDir() {
  if (const char* dir = std::getenv("TANDEM_FIXTURE_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  const char* src = std::getenv("TANDEM_SOURCE_DIR");
  const std::string root = (src != nullptr && *src != '\0') ? src : ".";
  return root + "/build/fixtures";
}

// Full path of fixture `name` (e.g. "types.gguf").
inline std::string FixturePath(std::string_view name) {
  return FixtureDir() + "/" + std::string(name);
}

// Path of `rel` under the committed test data, $TANDEM_SOURCE_DIR/tests/data.
inline std::string TestDataPath(const std::string& rel) {
  const char* src = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(src != nullptr && *src != '\0' ? src : ".") + "/tests/data/" + rel;
}

// Whole file as bytes; empty if it cannot be read.
inline std::string ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tandem
