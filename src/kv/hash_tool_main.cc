// kv_hash_tool: prints the prefix-cache block hashes of a token sequence, one hex per line
// (the root hash h_{-1} first). Used by kv_test to check that separate processes agree, and
// handy for debugging cache misses across nodes.
//
//   kv_hash_tool --fingerprint=F --block-size=16 --dtype=f16 [--extra=S] TOKEN...
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "kv/block_hash.h"

namespace {

bool ParseInt(std::string_view s, int32_t* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

int Usage() {
  std::fprintf(stderr,
               "usage: kv_hash_tool --fingerprint=F --block-size=N --dtype=D [--extra=S] "
               "TOKEN...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string fingerprint;
  std::string dtype = "f16";
  std::string extra;
  int32_t block_size = 16;
  std::vector<int32_t> tokens;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.starts_with("--fingerprint=")) {
      fingerprint = arg.substr(14);
    } else if (arg.starts_with("--dtype=")) {
      dtype = arg.substr(8);
    } else if (arg.starts_with("--extra=")) {
      extra = arg.substr(8);
    } else if (arg.starts_with("--block-size=")) {
      if (!ParseInt(arg.substr(13), &block_size) || block_size <= 0) return Usage();
    } else {
      int32_t token = 0;
      if (!ParseInt(arg, &token)) return Usage();
      tokens.push_back(token);
    }
  }
  const tandem::kv::BlockHash root = tandem::kv::ComputeRootHash(fingerprint, block_size, dtype);
  std::printf("%s\n", root.ToHex().c_str());
  for (const auto& h : tandem::kv::HashFullBlocks(root, tokens, block_size, extra)) {
    std::printf("%s\n", h.ToHex().c_str());
  }
  return 0;
}
