#include "proxy/metrics_merge.h"

#include <set>

#include "common/metrics.h"

namespace tandem::proxy {
namespace {

bool Wanted(std::string_view name) {
  if (name.substr(0, 13) == "tandem_proxy_") return false;
  return name.substr(0, 5) == "vllm:" || name.substr(0, 7) == "tandem_";
}

// The metric name at the start of a sample line.
std::string_view SampleName(std::string_view line) {
  size_t end = line.find_first_of("{ ");
  return line.substr(0, end == std::string_view::npos ? line.size() : end);
}

// The sample line with its engine label set to `engine` (added if absent).
std::string Relabel(std::string_view line, std::string_view name, const std::string& engine) {
  const std::string label = "engine=\"" + EscapePrometheusLabelValue(engine) + "\"";
  std::string_view rest = line.substr(name.size());
  if (rest.empty() || rest[0] != '{') return std::string(name) + "{" + label + "}" + std::string(rest);
  const size_t close = rest.find('}');
  if (close == std::string_view::npos) return {};
  std::string_view labels = rest.substr(1, close - 1);
  std::string out = std::string(name) + "{" + label;
  // Copy the other labels, dropping an existing engine="..." (values may hold escaped quotes).
  size_t i = 0;
  while (i < labels.size()) {
    size_t eq = labels.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= labels.size() || labels[eq + 1] != '"') return {};
    size_t j = eq + 2;
    while (j < labels.size() && labels[j] != '"') j += labels[j] == '\\' ? 2 : 1;
    if (j >= labels.size()) return {};
    std::string_view key = labels.substr(i, eq - i);
    if (key != "engine") out += "," + std::string(labels.substr(i, j + 1 - i));
    i = j + 1;
    if (i < labels.size() && labels[i] == ',') ++i;
  }
  out += "}" + std::string(rest.substr(close + 1));
  return out;
}

}  // namespace

std::string MergeBackendMetrics(std::string_view own, const std::vector<ScrapedBackend>& backends) {
  std::string out(own);
  if (!out.empty() && out.back() != '\n') out += '\n';
  std::set<std::string, std::less<>> described;
  for (const ScrapedBackend& b : backends) {
    std::string_view text = b.text;
    while (!text.empty()) {
      const size_t nl = text.find('\n');
      std::string_view line = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
      if (line.empty()) continue;
      if (line[0] == '#') {
        // "# HELP name ..." / "# TYPE name ...": once per family.
        if (line.size() < 7 || (line.substr(0, 7) != "# HELP " && line.substr(0, 7) != "# TYPE ")) continue;
        std::string_view name = line.substr(7);
        name = name.substr(0, name.find(' '));
        if (!Wanted(name)) continue;
        std::string key = std::string(line.substr(2, 4)) + " " + std::string(name);
        if (described.insert(key).second) out += std::string(line) + "\n";
        continue;
      }
      std::string_view name = SampleName(line);
      // Histogram and counter suffixes belong to their family.
      if (!Wanted(name)) continue;
      std::string relabelled = Relabel(line, name, b.engine);
      if (!relabelled.empty()) out += relabelled + "\n";
    }
  }
  return out;
}

}  // namespace tandem::proxy
