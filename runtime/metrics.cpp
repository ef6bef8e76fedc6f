#include "runtime/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace ordo {

namespace {

// Shortest decimal text that reads back as the same double; Prometheus spellings for non-finite.
std::string format_double(double v) {
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) { // integral: no exponent
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

bool valid_name(const std::string& s, bool allow_colon) {
  if (s.empty())
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (allow_colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok)
      return false;
  }
  return true;
}

std::string escape(const std::string& s, bool quote) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (quote && c == '"')
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

// `{a="x",b="y"}`, with `extra` (the histogram's le) last; empty when there are no labels.
std::string label_text(const metric_labels& labels, const std::string& extra = "") {
  std::string out;
  for (auto& [k, v] : labels)
    out += (out.empty() ? "" : ",") + k + "=\"" + escape(v, true) + "\"";
  if (!extra.empty())
    out += (out.empty() ? "" : ",") + extra;
  return out.empty() ? out : "{" + out + "}";
}

void add_double(std::atomic<double>& a, double d) {
  double old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, old + d, std::memory_order_relaxed)) {
  }
}

[[noreturn]] void refuse(const std::string& name, const std::string& why) {
  throw std::invalid_argument("metric " + name + ": " + why);
}

} // namespace

void metric_gauge::add(double d) {
  add_double(value_, d);
}

metric_histogram::metric_histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && !(bounds_[i] > bounds_[i - 1])))
      throw std::invalid_argument("histogram bucket bounds must be finite and strictly increasing");
  }
  for (size_t i = 0; i <= bounds_.size(); ++i)
    counts_[i].store(0, std::memory_order_relaxed);
}

void metric_histogram::observe(double v) {
  // First bound >= v: Prometheus buckets are `le` (less than or equal).
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  add_double(sum_, v);
}

std::vector<uint64_t> metric_histogram::cumulative_counts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    out[i] = total;
  }
  return out;
}

std::vector<double> exponential_buckets(double start, double factor, int count) {
  std::vector<double> out;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor)
    out.push_back(v);
  return out;
}

struct metrics_registry::family {
  struct series {
    metric_labels labels;
    std::unique_ptr<metric_counter> counter;
    std::unique_ptr<metric_gauge> gauge;
    std::unique_ptr<metric_histogram> histogram;
  };

  std::string name;
  std::string help;
  std::string type; // counter | gauge | histogram
  std::vector<double> bounds;
  std::vector<series> all;

  series* find(const metric_labels& labels) {
    for (auto& s : all)
      if (s.labels == labels)
        return &s;
    return nullptr;
  }
};

metrics_registry::metrics_registry() = default;
metrics_registry::~metrics_registry() = default;

metrics_registry::family& metrics_registry::family_for(const std::string& name,
                                                       const std::string& help, const char* type,
                                                       const metric_labels& labels) {
  if (name.rfind("ordo_", 0) != 0)
    refuse(name, "name must start with ordo_");
  if (!valid_name(name, true))
    refuse(name, "name must match [a-zA-Z_:][a-zA-Z0-9_:]*");
  const std::string t = type;
  const bool ends_total = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
  if (t == "counter" && !ends_total)
    refuse(name, "a counter's name must end in _total");
  // The lints of `promtool check metrics`: a _total gauge reads as a counter, and the histogram
  // suffixes belong to a histogram's own series.
  if (t != "counter" && ends_total)
    refuse(name, "only a counter's name may end in _total (a " + t + " could end in _capacity, _current ...)");
  for (const char* suffix : {"_bucket", "_count", "_sum"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
      refuse(name, "the suffix " + s + " is reserved for a histogram's series");
  }
  if (help.empty())
    refuse(name, "help text must not be empty");
  for (auto& [k, v] : labels) {
    if (!valid_name(k, false) || k.rfind("__", 0) == 0)
      refuse(name, "label name \"" + k + "\" must match [a-zA-Z_][a-zA-Z0-9_]* without a __ prefix");
    if (k == "le" || k == "quantile")
      refuse(name, "label " + k + " is reserved for histogram buckets and summary quantiles");
  }
  for (size_t i = 0; i < labels.size(); ++i)
    for (size_t j = i + 1; j < labels.size(); ++j)
      if (labels[i].first == labels[j].first)
        refuse(name, "label " + labels[i].first + " given twice");

  for (auto& f : families_) {
    if (f->name != name)
      continue;
    if (f->type != t)
      refuse(name, "already registered as a " + f->type);
    if (f->help != help)
      refuse(name, "already registered with other help text");
    return *f;
  }
  families_.push_back(std::make_unique<family>());
  family& f = *families_.back();
  f.name = name;
  f.help = help;
  f.type = t;
  return f;
}

metric_counter& metrics_registry::counter(const std::string& name, const std::string& help,
                                          const metric_labels& labels) {
  std::lock_guard<std::mutex> guard(mutex_);
  family& f = family_for(name, help, "counter", labels);
  if (auto s = f.find(labels))
    return *s->counter;
  f.all.push_back({labels, std::make_unique<metric_counter>(), nullptr, nullptr});
  return *f.all.back().counter;
}

metric_gauge& metrics_registry::gauge(const std::string& name, const std::string& help,
                                      const metric_labels& labels) {
  std::lock_guard<std::mutex> guard(mutex_);
  family& f = family_for(name, help, "gauge", labels);
  if (auto s = f.find(labels))
    return *s->gauge;
  f.all.push_back({labels, nullptr, std::make_unique<metric_gauge>(), nullptr});
  return *f.all.back().gauge;
}

metric_histogram& metrics_registry::histogram(const std::string& name, const std::string& help,
                                              const std::vector<double>& upper_bounds,
                                              const metric_labels& labels) {
  std::lock_guard<std::mutex> guard(mutex_);
  // Validate the bounds before the family exists, so a refused call leaves no trace.
  auto h = std::make_unique<metric_histogram>(upper_bounds);
  family& f = family_for(name, help, "histogram", labels);
  if (f.all.empty())
    f.bounds = upper_bounds;
  else if (f.bounds != upper_bounds)
    refuse(name, "already registered with other buckets");
  if (auto s = f.find(labels))
    return *s->histogram;
  f.all.push_back({labels, nullptr, nullptr, std::move(h)});
  return *f.all.back().histogram;
}

std::string metrics_registry::render_prometheus() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::string out;
  for (auto& fp : families_) {
    const family& f = *fp;
    out += "# HELP " + f.name + " " + escape(f.help, false) + "\n";
    out += "# TYPE " + f.name + " " + f.type + "\n";
    for (auto& s : f.all) {
      if (s.counter) {
        out += f.name + label_text(s.labels) + " " + std::to_string(s.counter->value()) + "\n";
      } else if (s.gauge) {
        out += f.name + label_text(s.labels) + " " + format_double(s.gauge->value()) + "\n";
      } else {
        const auto counts = s.histogram->cumulative_counts();
        const auto& bounds = s.histogram->upper_bounds();
        for (size_t i = 0; i <= bounds.size(); ++i) {
          std::string le = i < bounds.size() ? format_double(bounds[i]) : "+Inf";
          out += f.name + "_bucket" + label_text(s.labels, "le=\"" + le + "\"") + " " +
                 std::to_string(counts[i]) + "\n";
        }
        out += f.name + "_sum" + label_text(s.labels) + " " + format_double(s.histogram->sum()) +
               "\n";
        out += f.name + "_count" + label_text(s.labels) + " " + std::to_string(counts.back()) +
               "\n";
      }
    }
  }
  return out;
}

} // namespace ordo
