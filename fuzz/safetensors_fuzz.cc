// libFuzzer target: the safetensors header reader and the shard index parser. Any input
// must give a Status, never a crash; a file it accepts has every tensor's bytes inside
// the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = tandem::SafetensorsFile::FromBuffer(data, size);
  if (file.ok()) {
    for (const tandem::SafetensorsTensor& t : (*file)->tensors()) {
      if (t.size_bytes() > 0 && (t.data < data || t.data + t.size_bytes() > data + size)) std::abort();
      volatile uint8_t sink = t.size_bytes() > 0 ? t.data[t.size_bytes() - 1] : 0;  // ASan checks the read
      (void)sink;
    }
  }
  (void)tandem::ParseSafetensorsIndex(std::string_view(reinterpret_cast<const char*>(data), size), "<fuzz>");
  return 0;
}
