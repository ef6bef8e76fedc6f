#include "runtime/connector_policy.hpp"

#include <utility>

namespace ordo {

namespace {

class none_connector final : public connector_policy {
public:
  explicit none_connector(std::string name) : name_(std::move(name)) {}

  std::optional<store_contains> lookup(const connector_lookup&) const override { return std::nullopt; }
  connector_lookup_done lookup_answered(const connector_lookup& lookup, const store_contains_done&) const override {
    return connector_lookup_done{lookup.request_id, 0, 0, name_, {}, {}, {}, false};
  }
  std::optional<store_step> step(const connector_step&) const override { return std::nullopt; }
  connector_step_done step_answered(const connector_step& step, const store_step_done&) const override {
    connector_step_done done; // an eviction finds nothing to drop
    done.header = step.header;
    for (const auto& l : step.loads)
      done.loads.push_back({l.request_id, l.object.key, false, "connector none holds nothing", 0, 0, {}});
    for (const auto& s : step.saves)
      done.saves.push_back({s.request_id, s.object.key, false, "connector none stores nothing", 0, 0, {}});
    for (const auto& l : step.leases)
      done.leases.push_back({l.request_id, 0, 0});
    return done;
  }

private:
  std::string name_;
};

class offload_connector final : public connector_policy {
public:
  explicit offload_connector(const offload_options& options) : policy_(options) {}

  std::optional<store_contains> lookup(const connector_lookup& lookup) const override {
    auto probe = policy_.probe(lookup);
    if (probe.keys.empty())
      return std::nullopt;
    return probe;
  }
  connector_lookup_done lookup_answered(const connector_lookup& lookup,
                                        const store_contains_done& found) const override {
    return policy_.answer(lookup, found);
  }
  // Always a store step, even an empty one: its answer carries the store's stats.
  std::optional<store_step> step(const connector_step& step) const override { return policy_.to_store(step); }
  connector_step_done step_answered(const connector_step& step, const store_step_done& done) const override {
    return policy_.from_store(step, done);
  }

private:
  offload_policy policy_;
};

} // namespace

std::shared_ptr<const connector_policy> make_connector_policy(const std::string& name,
                                                              const std::optional<offload_options>& offload) {
  if (offload)
    return std::make_shared<offload_connector>(*offload);
  return std::make_shared<none_connector>(name);
}

} // namespace ordo
