// MetricsRegistry: counters, gauges and histograms rendered in the Prometheus text
// exposition format (what `/metrics` serves).
//
// Series are created once (at start-up) and updated from any thread: counters and
// gauges are lock-free atomics, histograms take a short lock. Names follow vLLM's
// (`vllm:prompt_tokens`, label `model_name`), so existing dashboards and scripts written
// for vLLM read them unchanged.
// Thread safety: all methods are thread-safe. Returned pointers live as long as the registry.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

using MetricLabels = std::map<std::string, std::string>;

// `value` as it goes between the quotes of a label in the text format: backslash and
// double quote escaped with a backslash, a newline written as \n.
std::string EscapePrometheusLabelValue(std::string_view value);

class Counter {
 public:
  void Add(double v = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending; +Inf is implicit
  void Observe(double v);
  // Cumulative bucket counts [bounds + 1], sum and count.
  void Read(std::vector<uint64_t>* cumulative, double* sum, uint64_t* count) const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // [bounds + 1], not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

class MetricsRegistry {
 public:
  // Returns the series for (name, labels), creating it (and its family's HELP line)
  // on first use. A name keeps the type it was first created with.
  Counter* GetCounter(const std::string& name, const std::string& help, const MetricLabels& labels = {});
  Gauge* GetGauge(const std::string& name, const std::string& help, const MetricLabels& labels = {});
  Histogram* GetHistogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                          const MetricLabels& labels = {});

  // The whole registry in Prometheus text format 0.0.4.
  std::string RenderPrometheus() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;
    std::map<MetricLabels, std::unique_ptr<Counter>> counters;
    std::map<MetricLabels, std::unique_ptr<Gauge>> gauges;
    std::map<MetricLabels, std::unique_ptr<Histogram>> histograms;
  };
  Family& GetFamily(const std::string& name, Type type, const std::string& help);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

}  // namespace tandem
