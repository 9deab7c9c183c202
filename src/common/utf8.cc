#include "common/utf8.h"

namespace tandem {

int Utf8EncodedLength(uint32_t code_point) {
  return code_point < 0x80 ? 1 : code_point < 0x800 ? 2 : code_point < 0x10000 ? 3 : 4;
}

int EncodeUtf8(uint32_t code_point, uint8_t* out) {
  const int n = Utf8EncodedLength(code_point);
  if (n == 1) {
    out[0] = static_cast<uint8_t>(code_point);
    return 1;
  }
  // Continuation bytes carry six bits each, last byte first; the lead byte takes the
  // rest behind its length marker.
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (code_point & 0x3F));
    code_point >>= 6;
  }
  out[0] = static_cast<uint8_t>((n == 2 ? 0xC0 : n == 3 ? 0xE0 : 0xF0) | code_point);
  return n;
}

void AppendUtf8(uint32_t code_point, std::string* out) {
  uint8_t bytes[4];
  const int n = EncodeUtf8(code_point, bytes);
  out->append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(n));
}

}  // namespace tandem
