#include "ops/prometheus_text.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace tandem::ops {
namespace {

bool IsNameChar(char c, bool first) {
  const bool alpha = std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
  return first ? alpha : alpha || std::isdigit(static_cast<unsigned char>(c));
}

void SkipBlanks(std::string_view line, size_t* pos) {
  while (*pos < line.size() && (line[*pos] == ' ' || line[*pos] == '\t')) ++*pos;
}

bool ParseValue(std::string_view token, double* value) {
  if (token == "NaN") {
    *value = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (token == "+Inf" || token == "Inf") {
    *value = std::numeric_limits<double>::infinity();
    return true;
  }
  if (token == "-Inf") {
    *value = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (token.empty()) return false;
  const std::string copy(token);  // strtod needs a terminator
  char* end = nullptr;
  errno = 0;
  *value = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size() && errno != ERANGE;
}

// Parses `{a="x",b="y"}` starting at line[*pos] == '{'; leaves *pos after '}'.
bool ParseLabels(std::string_view line, size_t* pos, std::map<std::string, std::string>* labels) {
  ++*pos;  // '{'
  while (true) {
    SkipBlanks(line, pos);
    if (*pos >= line.size()) return false;
    if (line[*pos] == '}') {
      ++*pos;
      return true;
    }
    const size_t name_start = *pos;
    while (*pos < line.size() && IsNameChar(line[*pos], *pos == name_start)) ++*pos;
    if (*pos == name_start) return false;
    std::string name(line.substr(name_start, *pos - name_start));
    SkipBlanks(line, pos);
    if (*pos >= line.size() || line[*pos] != '=') return false;
    ++*pos;
    SkipBlanks(line, pos);
    if (*pos >= line.size() || line[*pos] != '"') return false;
    ++*pos;
    std::string value;
    while (true) {
      if (*pos >= line.size()) return false;
      const char c = line[(*pos)++];
      if (c == '"') break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (*pos >= line.size()) return false;
      const char escaped = line[(*pos)++];
      value += escaped == 'n' ? '\n' : escaped;  // \\ and \" stand for themselves
    }
    (*labels)[std::move(name)] = std::move(value);
    SkipBlanks(line, pos);
    if (*pos < line.size() && line[*pos] == ',') ++*pos;
  }
}

bool ParseSampleLine(std::string_view line, MetricSample* sample) {
  size_t pos = 0;
  SkipBlanks(line, &pos);
  const size_t name_start = pos;
  while (pos < line.size() && IsNameChar(line[pos], pos == name_start)) ++pos;
  if (pos == name_start) return false;
  sample->name = std::string(line.substr(name_start, pos - name_start));
  SkipBlanks(line, &pos);
  if (pos < line.size() && line[pos] == '{' && !ParseLabels(line, &pos, &sample->labels)) {
    return false;
  }
  SkipBlanks(line, &pos);
  const size_t value_start = pos;
  while (pos < line.size() && line[pos] != ' ' && line[pos] != '\t') ++pos;
  if (!ParseValue(line.substr(value_start, pos - value_start), &sample->value)) return false;
  SkipBlanks(line, &pos);
  // An optional integer timestamp (milliseconds) may follow; anything else is an error.
  const size_t ts_start = pos;
  if (pos < line.size() && (line[pos] == '-' || line[pos] == '+')) ++pos;
  while (pos < line.size() && std::isdigit(static_cast<unsigned char>(line[pos]))) ++pos;
  if (pos > ts_start) SkipBlanks(line, &pos);
  return pos == line.size();
}

}  // namespace

StatusOr<std::vector<MetricSample>> ParsePrometheusText(std::string_view text) {
  std::vector<MetricSample> samples;
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') continue;
    MetricSample sample;
    if (!ParseSampleLine(line, &sample)) {
      return InvalidArgumentError("metrics line " + std::to_string(line_number) +
                                  " is not a sample: " + std::string(line.substr(0, 200)));
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace tandem::ops
