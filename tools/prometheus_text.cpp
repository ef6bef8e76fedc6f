#include "tools/prometheus_text.hpp"

#include <sstream>

namespace ordo {

bool parse_prometheus_samples(const std::string& text, const std::string& name, std::vector<prometheus_sample>& out,
                              std::string& why) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.compare(0, name.size(), name) != 0)
      continue;
    size_t i = name.size();
    if (i < line.size() && line[i] != '{' && line[i] != ' ' && line[i] != '\t')
      continue; // a longer name (name_bucket, name_total)
    prometheus_sample smp;
    if (i < line.size() && line[i] == '{') {
      ++i;
      for (;;) {
        while (i < line.size() && (line[i] == ' ' || line[i] == ','))
          ++i;
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          why = "cannot read the labels of: " + line;
          return false;
        }
        std::string key = line.substr(i, eq - i), value;
        i = eq + 2;
        for (; i < line.size() && line[i] != '"'; ++i) {
          if (line[i] == '\\' && i + 1 < line.size()) {
            ++i;
            value += line[i] == 'n' ? '\n' : line[i];
          } else {
            value += line[i];
          }
        }
        if (i >= line.size()) {
          why = "an unterminated label value in: " + line;
          return false;
        }
        ++i; // the closing quote
        smp.labels[key] = value;
      }
    }
    std::istringstream rest(line.substr(i));
    if (!(rest >> smp.value)) {
      why = "no value in: " + line;
      return false;
    }
    out.push_back(std::move(smp));
  }
  return true;
}

} // namespace ordo
