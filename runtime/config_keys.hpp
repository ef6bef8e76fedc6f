// One declaration per config key (issue 38 item 7): its section and name, its type, what it
// allows, one line saying what it does, and how it reads into and shows from the config struct.
// A config's key table (node: runtime/config.cpp:node_keys, store: runtime/store_config.cpp:
// store_keys, proxy: tools/proxy/proxy_config.cpp:proxy_keys) drives everything a key used to be
// written into by hand:
//
//   what                                      made by
//   sections and keys a file may name,        schema_of (the `--set` parser takes a bare word as
//     which `--set` words stay text, secrets    text for every key but an integer one)
//   reading the file and the `--set`s         read_keys (types and ranges; refusals name the key)
//   each key's own rule (range, choice, more) check_keys (validate(): also a config built by hand)
//   describe(), render_config_toml()          for_each_shown (table order, `shown` and `after`)
//   docs/config.md, `ordo config keys`        markdown_table
//
// Rules between keys (connector "store" needs store.address, bf16 weights need a GPU, ...) stay
// code in the config's validate(). Pure: no CAF.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/toml_config.hpp"

namespace ordo::config_keys {

// What a key's value is. Every type but integer is text in the file, so a bare `--set` word for
// it stays text (server.host=127.0.0.1). A secret's value is never shown: describe() says
// whether it is set, render_config_toml() leaves it out, messages say "(not shown)".
enum class key_type : uint8_t { integer, text, choice, list, json, secret };

inline const char* to_string(key_type t) {
  switch (t) {
  case key_type::integer: return "integer";
  case key_type::text: return "string";
  case key_type::choice: return "choice";
  case key_type::list: return "list";
  case key_type::json: return "JSON";
  case key_type::secret: return "secret";
  }
  return "?";
}

template <class Config>
struct key {
  std::string section, name;
  key_type type = key_type::text;
  std::string rule; // what is allowed: the words of the key's refusals and of the docs
  std::string doc;  // what it does, one line (docs/config.md)
  // Integer keys: the range read_keys and check_keys refuse values outside of.
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  std::vector<std::string> choices; // a text key's closed set of values (check_keys)
  // The file's (or a --set's) value into the config. Null: the config reads it itself, after the
  // table (kv_transfer.config, which other keys are compared with).
  std::function<void(const toml_config::reader&, Config&)> read;
  // The value as describe() and the docs write it, unquoted. Null: never written.
  std::function<std::string(const Config&)> value;
  // A signed integer key's value, for check_keys' range check. Null: no range check after
  // reading (an unsigned field cannot hold what the reader refused).
  std::function<int64_t(const Config&)> number;
  std::function<bool(const Config&)> shown; // whether describe() writes it; null: always
  std::function<void(const Config&)> check; // the key's own rule beyond range and choices
  // describe() writes the key right after this key of its section instead of in table order
  // (model.path after model.seed: it stands where the preset's keys stand).
  std::string after;

  std::string dotted() const { return section + "." + name; }

  key when(std::function<bool(const Config&)> f) && {
    shown = std::move(f);
    return std::move(*this);
  }
  key checked(std::function<void(const Config&)> f) && {
    check = std::move(f);
    return std::move(*this);
  }
  key described_after(std::string other) && {
    after = std::move(other);
    return std::move(*this);
  }
};

template <class Config>
using key_table = std::vector<key<Config>>;

// Builders of a Config's keys. `field` is a member pointer (&node_config::port) or a function
// returning the field (`[](auto& c) -> auto& { return c.tls.mode; }`).
template <class Config>
struct keys_of {
  using key_t = key<Config>;

  static key_t start(std::string section, std::string name, key_type type, std::string rule, std::string doc) {
    key_t k;
    k.section = std::move(section);
    k.name = std::move(name);
    k.type = type;
    k.rule = std::move(rule);
    k.doc = std::move(doc);
    return k;
  }

  template <class Field>
  static key_t integer(std::string section, std::string name, Field field, int64_t lo, int64_t hi,
                       std::string rule, std::string doc) {
    key_t k = start(section, name, key_type::integer, rule, std::move(doc));
    k.lo = lo;
    k.hi = hi;
    k.read = [section, name, field, lo, hi, rule](const toml_config::reader& r, Config& c) {
      auto& f = std::invoke(field, c);
      f = static_cast<std::decay_t<decltype(f)>>(r.integer(section, name, static_cast<int64_t>(f), lo, hi, rule));
    };
    k.value = [field](const Config& c) { return std::to_string(std::invoke(field, c)); };
    using T = std::decay_t<std::invoke_result_t<Field, const Config&>>;
    if constexpr (std::is_signed_v<T>)
      k.number = [field](const Config& c) { return static_cast<int64_t>(std::invoke(field, c)); };
    return k;
  }

  template <class Field>
  static key_t text(std::string section, std::string name, Field field, std::string rule, std::string doc) {
    key_t k = start(section, name, key_type::text, rule, std::move(doc));
    k.read = [section, name, field, rule](const toml_config::reader& r, Config& c) {
      r.string(section, name, std::invoke(field, c), rule);
    };
    k.value = [field](const Config& c) { return std::string(std::invoke(field, c)); };
    return k;
  }

  // A text key with a closed set of values: "one of A, B" in its refusals.
  template <class Field>
  static key_t text_choice(std::string section, std::string name, Field field, std::vector<std::string> values,
                           std::string doc) {
    key_t k = text(std::move(section), std::move(name), field, "one of " + toml_config::join(values), std::move(doc));
    k.type = key_type::choice;
    k.choices = std::move(values);
    return k;
  }

  template <class Field>
  static key_t secret(std::string section, std::string name, Field field, std::string rule, std::string doc) {
    key_t k = text(std::move(section), std::move(name), field, std::move(rule), std::move(doc));
    k.type = key_type::secret;
    return k;
  }

  // An enum field named by `names` ({value, name} pairs; an empty name shows as `"" (none)`).
  template <class Field, class E>
  static key_t choice(std::string section, std::string name, Field field,
                      const std::vector<std::pair<E, std::string>>& names, std::string doc) {
    std::vector<std::string> listed;
    for (auto& [e, n] : names)
      listed.push_back(n.empty() ? "\"\" (none)" : n);
    const std::string rule = "one of " + toml_config::join(listed);
    key_t k = start(section, name, key_type::choice, rule, std::move(doc));
    k.read = [section, name, field, names, rule](const toml_config::reader& r, Config& c) {
      std::string given;
      r.string(section, name, given, rule);
      if (!r.find(section, name))
        return;
      for (auto& [e, n] : names)
        if (n == given) {
          std::invoke(field, c) = e;
          return;
        }
      toml_config::fail(section + "." + name + " = " + toml_config::in_quotes(given) + ": must be " + rule);
    };
    k.value = [field, names](const Config& c) {
      for (auto& [e, n] : names)
        if (e == std::invoke(field, c))
          return n;
      return std::string("?");
    };
    return k;
  }

  // A key the config reads and writes itself (a list, JSON): `read` and `value` may be null.
  static key_t custom(std::string section, std::string name, key_type type, std::string rule, std::string doc,
                      std::function<void(const toml_config::reader&, Config&)> read,
                      std::function<std::string(const Config&)> value) {
    key_t k = start(std::move(section), std::move(name), type, std::move(rule), std::move(doc));
    k.read = std::move(read);
    k.value = std::move(value);
    return k;
  }
};

// The tables of several sections as one: concat<Config>({{...}, security_keys<Config>(), {...}}).
template <class Config>
key_table<Config> concat(std::initializer_list<key_table<Config>> parts) {
  key_table<Config> out;
  for (const auto& part : parts)
    out.insert(out.end(), part.begin(), part.end());
  return out;
}

// [security] of the node's and the store's config (docs/security.md): the deployment secret's file
// and mutual TLS; Config has `secret_file` and `tls` (runtime/tls.hpp). describe() writes the file
// when set and, with TLS on, tls, certificate and cafile. The rules between them (each file named
// with TLS on, none without) are check_tls_settings'.
template <class Config>
key_table<Config> security_keys() {
  using k = keys_of<Config>;
  auto tls_on = [](const Config& c) { return c.tls.on(); };
  return {
      k::text("security", "secret_file", &Config::secret_file,
              "a file path (\"\" = $XDG_RUNTIME_DIR/ordo/secret, else ~/.config/ordo/secret)",
              "the deployment secret's file (docs/security.md)")
          .when([](const Config& c) { return !c.secret_file.empty(); }),
      k::text_choice("security", "tls", [](auto& c) -> auto& { return c.tls.mode; }, {"off", "on"},
                     "mutual TLS 1.3 on the actor port and to peers (docs/security.md)")
          .when(tls_on),
      k::text("security", "certificate", [](auto& c) -> auto& { return c.tls.certificate; },
              "a PEM certificate's path (`ordo certs`)", "this process's certificate, with security.tls = \"on\"")
          .when(tls_on),
      // A path, not a secret; describe() has never written it all the same.
      k::text("security", "key", [](auto& c) -> auto& { return c.tls.key; }, "a PEM private key's path (`ordo certs`)",
              "the certificate's private key")
          .when([](const Config&) { return false; }),
      k::text("security", "cafile", [](auto& c) -> auto& { return c.tls.cafile; },
              "the deployment CA's PEM certificate (`ordo certs`)", "the CA every peer's certificate must be signed by")
          .when(tls_on),
  };
}

// [log] level, the same in every config.
template <class Config>
key<Config> log_level_key() {
  return keys_of<Config>::text_choice("log", "level", &Config::log_level, toml_config::log_levels,
                                      "the least severe message logged");
}

// The schema toml_config::parse checks names against: the sections in the order the table first
// names them, each with its keys in table order. A value is hidden from messages when its key is a
// secret, and, with `hide_secret_looking`, when an unknown key looks like one (a misspelt
// server.api_key: its value is most likely a secret).
template <class Config>
toml_config::schema schema_of(const key_table<Config>& keys, std::string example_set, std::string example_key,
                              bool hide_secret_looking) {
  toml_config::schema s;
  std::vector<std::string> secrets, known;
  for (const auto& k : keys) {
    auto it = std::find_if(s.sections.begin(), s.sections.end(), [&](auto& x) { return x.first == k.section; });
    if (it == s.sections.end())
      it = s.sections.insert(s.sections.end(), {k.section, {}});
    it->second.push_back(k.name);
    if (k.type != key_type::integer)
      s.string_keys.push_back(k.dotted());
    (k.type == key_type::secret ? secrets : known).push_back(k.dotted());
  }
  s.is_secret_key = [secrets, known, hide_secret_looking](const std::string& dotted) {
    if (toml_config::contains(secrets, dotted))
      return true;
    return hide_secret_looking && !toml_config::contains(known, dotted) && toml_config::looks_secret(dotted);
  };
  s.example_set = std::move(example_set);
  s.example_key = std::move(example_key);
  return s;
}

// Reads every key the table reads, in table order, into `cfg`.
template <class Config>
void read_keys(const key_table<Config>& keys, const toml_config::reader& r, Config& cfg) {
  for (const auto& k : keys)
    if (k.read)
      k.read(r, cfg);
}

// Each key's own rule, in table order: its range, its choices, then its check. The refusal is
// "KEY = VALUE: must be RULE", as the reader's.
template <class Config>
void check_keys(const key_table<Config>& keys, const Config& cfg) {
  for (const auto& k : keys) {
    if (k.number) {
      const int64_t v = k.number(cfg);
      if (v < k.lo || v > k.hi)
        toml_config::fail(k.dotted() + " = " + std::to_string(v) + ": must be " + k.rule);
    }
    if (!k.choices.empty())
      toml_config::check_choice(k.dotted(), k.value(cfg), k.choices);
    if (k.check)
      k.check(cfg);
  }
}

// f(key, value) for each key describe() writes for `cfg`, in describe()'s order: table order,
// except that a key with `after` follows that key. A secret's value is passed as it is: the
// caller writes "set" / "unset" or leaves it out.
template <class Config, class F>
void for_each_shown(const key_table<Config>& keys, const Config& cfg, F&& f) {
  auto visit = [&](const key<Config>& k) {
    if (k.value && (!k.shown || k.shown(cfg)))
      f(k, k.value(cfg));
  };
  for (const auto& k : keys) {
    if (!k.after.empty())
      continue;
    visit(k);
    for (const auto& later : keys)
      if (later.section == k.section && later.after == k.name)
        visit(later);
  }
}

// `section.key=value ...` on one line (secrets as set / unset): a config's describe().
template <class Config>
std::string describe_keys(const key_table<Config>& keys, const Config& cfg) {
  std::string out;
  for_each_shown(keys, cfg, [&](const key<Config>& k, const std::string& v) {
    out += (out.empty() ? "" : " ") + k.dotted() + "=" +
           (k.type == key_type::secret ? (v.empty() ? "unset" : "set") : v);
  });
  return out;
}

// The keys describe() writes as a TOML document that reads back to the same config, without the
// secrets.
template <class Config>
std::string render_toml(const key_table<Config>& keys, const Config& cfg) {
  std::string out, section;
  for_each_shown(keys, cfg, [&](const key<Config>& k, const std::string& v) {
    if (k.type == key_type::secret)
      return;
    if (k.section != section) {
      out += (out.empty() ? "[" : "\n[") + k.section + "]\n";
      section = k.section;
    }
    std::string value = v;
    if (k.type != key_type::integer) {
      value = "\"";
      for (char c : v)
        value += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
      value += "\"";
    }
    out += k.name + " = " + value + "\n";
  });
  return out;
}

// One markdown table row per key: key, type, default (the value of a default-constructed
// Config, as TOML), what is allowed, what it does.
template <class Config>
std::string markdown_table(const key_table<Config>& keys) {
  auto cell = [](const std::string& s) {
    std::string out;
    for (char c : s)
      out += c == '|' ? std::string("\\|") : std::string(1, c);
    return out;
  };
  const Config defaults{};
  std::string out = "| key | type | default | allowed | what it does |\n| --- | --- | --- | --- | --- |\n";
  for (const auto& k : keys) {
    std::string def = "(unset)";
    if (k.type == key_type::secret)
      def = "`\"\"`";
    else if (k.value)
      def = k.type == key_type::integer ? "`" + k.value(defaults) + "`" : "`\"" + k.value(defaults) + "\"`";
    out += "| `" + k.dotted() + "` | " + to_string(k.type) + " | " + cell(def) + " | " + cell(k.rule) + " | " +
           cell(k.doc) + " |\n";
  }
  return out;
}

} // namespace ordo::config_keys
