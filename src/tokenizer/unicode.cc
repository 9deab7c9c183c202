#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

#include "common/utf8.h"
#include "tokenizer/unicode_tables.h"

namespace tandem::unicode {
namespace {

using unicode_internal::CategoryRange;

uint16_t LookupCategory(uint32_t cpt) {
  const CategoryRange* begin = unicode_internal::kCategoryRanges;
  const CategoryRange* end = begin + unicode_internal::kNumCategoryRanges;
  // The last range whose first code point is <= cpt.
  const CategoryRange* it = std::upper_bound(
      begin, end, cpt, [](uint32_t c, const CategoryRange& r) { return c < r.first_codepoint; });
  return it == begin ? kFlagUndefined : (it - 1)->flag;
}

bool LookupWhitespace(uint32_t cpt) {
  const uint32_t* begin = unicode_internal::kWhitespace;
  const uint32_t* end = begin + unicode_internal::kNumWhitespace;
  return std::binary_search(begin, end, cpt);
}

uint16_t ComputeFlags(uint32_t cpt) {
  uint16_t flags = LookupCategory(cpt);
  if (LookupWhitespace(cpt)) flags |= kFlagWhitespace;
  return flags;
}

// ASCII is by far the most common input; answer it from a small table.
const std::array<uint16_t, 128>& AsciiFlags() {
  static const std::array<uint16_t, 128> table = [] {
    std::array<uint16_t, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) t[c] = ComputeFlags(c);
    return t;
  }();
  return table;
}

struct ByteMaps {
  std::array<uint32_t, 256> byte_to_cpt{};
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 324> cpt_to_byte{};  // every mapped code point is < 256 + 68
};

const ByteMaps& GetByteMaps() {
  static const ByteMaps maps = [] {
    ByteMaps m;
    m.cpt_to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cpt = printable(b) ? static_cast<uint32_t>(b) : next_extra++;
      m.byte_to_cpt[b] = cpt;
      m.byte_to_utf8[b] = EncodeUtf8(cpt);
      m.cpt_to_byte[cpt] = static_cast<int16_t>(b);
    }
    return m;
  }();
  return maps;
}

}  // namespace

size_t Utf8SequenceLength(uint8_t lead) {
  static constexpr uint8_t kLengthByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1,
                                                      1, 1, 1, 1, 2, 2, 3, 4};
  return kLengthByHighNibble[lead >> 4];
}

uint32_t DecodeUtf8(std::string_view text, size_t* offset) {
  const size_t pos = *offset;
  const size_t n = text.size();
  auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  auto is_cont = [&](size_t i) { return i < n && (byte(i) & 0xC0) == 0x80; };
  const uint8_t b0 = byte(pos);
  if (b0 < 0x80) {
    *offset = pos + 1;
    return b0;
  }
  if ((b0 & 0xE0) == 0xC0 && is_cont(pos + 1)) {
    *offset = pos + 2;
    return (uint32_t{b0 & 0x1Fu} << 6) | (byte(pos + 1) & 0x3F);
  }
  if ((b0 & 0xF0) == 0xE0 && is_cont(pos + 1) && is_cont(pos + 2)) {
    *offset = pos + 3;
    return (uint32_t{b0 & 0x0Fu} << 12) | (uint32_t{byte(pos + 1) & 0x3Fu} << 6) |
           (byte(pos + 2) & 0x3F);
  }
  if ((b0 & 0xF8) == 0xF0 && is_cont(pos + 1) && is_cont(pos + 2) && is_cont(pos + 3)) {
    *offset = pos + 4;
    return (uint32_t{b0 & 0x07u} << 18) | (uint32_t{byte(pos + 1) & 0x3Fu} << 12) |
           (uint32_t{byte(pos + 2) & 0x3Fu} << 6) | (byte(pos + 3) & 0x3F);
  }
  *offset = pos + 1;
  return kReplacementChar;
}

std::vector<uint32_t> DecodeUtf8(std::string_view text) {
  std::vector<uint32_t> cpts;
  cpts.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) cpts.push_back(DecodeUtf8(text, &offset));
  return cpts;
}

void AppendUtf8(uint32_t cpt, std::string* out) {
  ::tandem::AppendUtf8(cpt > kMaxCodepoint ? kReplacementChar : cpt, out);
}

std::string EncodeUtf8(uint32_t cpt) {
  std::string out;
  AppendUtf8(cpt, &out);
  return out;
}

uint16_t CodepointFlags(uint32_t cpt) {
  if (cpt < 128) return AsciiFlags()[cpt];
  if (cpt > kMaxCodepoint) return kFlagUndefined;
  return ComputeFlags(cpt);
}

uint32_t ByteToCodepoint(uint8_t byte) { return GetByteMaps().byte_to_cpt[byte]; }

const std::string& ByteToUtf8(uint8_t byte) { return GetByteMaps().byte_to_utf8[byte]; }

int CodepointToByte(uint32_t cpt) {
  const auto& table = GetByteMaps().cpt_to_byte;
  return cpt < table.size() ? table[cpt] : -1;
}

}  // namespace tandem::unicode
