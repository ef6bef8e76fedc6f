// Reading a Prometheus text exposition (GET /metrics) in the tools that check one: `ordo topo
// run`'s metric steps and `ordo bench pd`'s bytes pulled.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ordo {

struct prometheus_sample {
  std::map<std::string, std::string> labels;
  std::string value; // as written
};

// The samples named exactly `name` in `text` (`name{k="v",...} value [timestamp]`; a longer name
// such as name_total is another metric); false with `why` on a line that cannot be read.
bool parse_prometheus_samples(const std::string& text, const std::string& name, std::vector<prometheus_sample>& out,
                              std::string& why);

} // namespace ordo
