#include "common/metrics.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace tandem {
namespace {

void AtomicAdd(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f", v);
    return buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

// {a="x",b="y"} with an optional extra label (le="...").
std::string LabelString(const MetricLabels& labels, const std::string& extra_key = "",
                        const std::string& extra_value = "") {
  if (labels.empty() && extra_key.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ",";
    out += k + "=\"" + EscapePrometheusLabelValue(v) + "\"";
    first = false;
  }
  if (!extra_key.empty()) {
    if (!first) out += ",";
    out += extra_key + "=\"" + extra_value + "\"";
  }
  return out + "}";
}

}  // namespace

std::string EscapePrometheusLabelValue(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void Counter::Add(double v) { AtomicAdd(value_, v); }
void Gauge::Add(double v) { AtomicAdd(value_, v); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::Read(std::vector<uint64_t>* cumulative, double* sum, uint64_t* count) const {
  std::lock_guard<std::mutex> lock(mu_);
  cumulative->resize(counts_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    running += counts_[i];
    (*cumulative)[i] = running;
  }
  *sum = sum_;
  *count = count_;
}

MetricsRegistry::Family& MetricsRegistry::GetFamily(const std::string& name, Type type,
                                                    const std::string& help) {
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.type = type;
    it->second.help = help;
  }
  return it->second;
}

Counter* MetricsRegistry::GetCounter(const std::string& name, const std::string& help,
                                     const MetricLabels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, Type::kCounter, help).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return slot.get();
}

Gauge* MetricsRegistry::GetGauge(const std::string& name, const std::string& help, const MetricLabels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, Type::kGauge, help).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return slot.get();
}

Histogram* MetricsRegistry::GetHistogram(const std::string& name, const std::string& help,
                                         const std::vector<double>& bounds, const MetricLabels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = GetFamily(name, Type::kHistogram, help).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(bounds);
  return slot.get();
}

std::string MetricsRegistry::RenderPrometheus() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream out;
  for (const auto& [name, family] : families_) {
    const char* type = family.type == Type::kCounter ? "counter" : family.type == Type::kGauge ? "gauge" : "histogram";
    out << "# HELP " << name << " " << family.help << "\n# TYPE " << name << " " << type << "\n";
    // Prometheus convention: counters are exposed with a _total suffix (vLLM does so).
    const std::string counter_name = name + "_total";
    for (const auto& [labels, c] : family.counters) {
      out << counter_name << LabelString(labels) << " " << FormatValue(c->value()) << "\n";
    }
    for (const auto& [labels, g] : family.gauges) {
      out << name << LabelString(labels) << " " << FormatValue(g->value()) << "\n";
    }
    for (const auto& [labels, h] : family.histograms) {
      std::vector<uint64_t> cumulative;
      double sum = 0;
      uint64_t count = 0;
      h->Read(&cumulative, &sum, &count);
      for (size_t i = 0; i < cumulative.size(); ++i) {
        const std::string le = i < h->bounds().size() ? FormatValue(h->bounds()[i]) : "+Inf";
        out << name << "_bucket" << LabelString(labels, "le", le) << " " << cumulative[i] << "\n";
      }
      out << name << "_sum" << LabelString(labels) << " " << FormatValue(sum) << "\n";
      out << name << "_count" << LabelString(labels) << " " << count << "\n";
    }
  }
  return out.str();
}

}  // namespace tandem
