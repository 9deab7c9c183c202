#include "common/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace tandem {

StatusOr<int64_t> ParseByteSize(std::string_view text) {
  const std::string original(text);
  auto bad = [&] {
    return InvalidArgumentError("bad size '" + original +
                                "' (expected e.g. 4GiB, 512MiB or a byte count)");
  };
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return bad();
  const std::string number(text.substr(0, digits));
  char* end = nullptr;
  double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) return bad();
  std::string unit;
  for (char c : text.substr(digits)) {
    if (!std::isspace(static_cast<unsigned char>(c)))
      unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  double scale = 1;
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else {
    const std::string prefixes = "kmgt";
    size_t power = prefixes.find(unit[0]);
    if (power == std::string::npos) return bad();
    std::string rest = unit.substr(1);
    double base;
    if (rest == "ib") {
      base = 1024;
    } else if (rest.empty() || rest == "b") {
      base = 1000;
    } else {
      return bad();
    }
    scale = std::pow(base, static_cast<double>(power + 1));
  }
  double bytes = value * scale;
  if (bytes < 1 || bytes > 9.0e18) return bad();
  return static_cast<int64_t>(bytes);
}

}  // namespace tandem
