// `ordo topo run FILE.toml` (issue 13, docs/topologies.md): starts real `ordo store|node|proxy`
// processes of this binary on loopback (port 0), runs the file's steps in order, prints one line
// per step and `N passed, M failed`, and stops every process it started, by pid (SIGTERM, a
// bounded wait, SIGKILL), also on errors and when the runner itself gets SIGINT / SIGTERM.
//
// Every wait is bounded: a ready line within 60 s, an HTTP request within 120 s, an exit within
// 30 s, a SIGSTOP / SIGCONT taking effect within 5 s, a sleep_ms step 600 s. The runner is
// single-threaded except while an HTTP request is in flight: the request runs on its own thread so
// the main thread can watch the deadline and the stop flag and shut the socket down when either
// fires.
#include "tools/harness/topo.hpp"
#include "tools/prometheus_text.hpp"
#include "tools/seeded_prompt.hpp"
#include "tools/harness/child_supervisor.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "actors/net/http_client.hpp"

namespace ordo {

namespace {

using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

constexpr double ready_limit_s = 60;
constexpr double http_limit_s = 120;
constexpr double exit_limit_s = 30;
constexpr double rebind_limit_s = 10;
constexpr double pause_limit_s = 5;
constexpr int64_t sleep_limit_ms = 600000;

volatile sig_atomic_t g_signal = 0; // SIGINT or SIGTERM received by the runner

extern "C" void on_stop_signal(int sig) { g_signal = sig; }

const char* sig_text(int sig) {
  switch (sig) {
  case SIGINT: return "SIGINT";
  case SIGTERM: return "SIGTERM";
  case SIGKILL: return "SIGKILL";
  default: {
    const char* s = strsignal(sig);
    return s ? s : "a signal";
  }
  }
}

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::string describe_status(int st) {
  if (WIFEXITED(st))
    return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st))
    return std::string("killed by ") + sig_text(WTERMSIG(st));
  return "status " + std::to_string(st);
}

constexpr size_t max_file_bytes = 1 << 20;  // a topology file or a config it names
constexpr size_t max_name_chars = 128;      // a process or step name
constexpr size_t log_tail_bytes = 64 * 1024; // what is read of a process's log

// At most the last `max_bytes` of a file a process writes (its logs, /proc): a process that
// logs without end costs the runner nothing.
std::string read_tail(const std::string& path, size_t max_bytes = log_tail_bytes) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  auto size = in.tellg();
  if (size > static_cast<std::streamoff>(max_bytes))
    in.seekg(size - static_cast<std::streamoff>(max_bytes));
  else
    in.seekg(0);
  in.clear();
  std::string text(max_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(max_bytes));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// Why `path` cannot be a file the runner reads or hands on (empty: it can): it must be a
// regular file (not /dev/zero, a FIFO or a directory) of at most max_file_bytes.
std::string file_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return std::string("cannot be read: ") + std::strerror(errno);
  if (!S_ISREG(st.st_mode))
    return "not a regular file (a config is a regular file of at most 1 MiB)";
  if (static_cast<uint64_t>(st.st_size) > max_file_bytes)
    return std::to_string(st.st_size) + " bytes (a config is a regular file of at most 1 MiB)";
  return "";
}

// A value quoted in a message, cut short: a hostile file's 30,000-character name is not echoed.
std::string shown(const std::string& v) {
  if (v.size() <= 64)
    return v;
  return v.substr(0, 48) + "... (" + std::to_string(v.size()) + " characters)";
}

// The last non-empty line of a log file (why a process stopped), bounded.
std::string last_line(const std::string& path) {
  std::string text = read_tail(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  auto nl = text.rfind('\n');
  std::string line = nl == std::string::npos ? text : text.substr(nl + 1);
  if (line.size() > 300)
    line = line.substr(0, 300) + "...";
  return line;
}

// ------------------------------------------------------------------------------------------
// The file

struct bad_file : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class proc_kind { store, node, proxy };

const char* kind_name(proc_kind k) {
  switch (k) {
  case proc_kind::store: return "store";
  case proc_kind::node: return "node";
  case proc_kind::proxy: return "proxy";
  }
  return "?";
}

struct proc {
  proc_kind kind = proc_kind::node;
  std::string name;
  std::string config;
  std::vector<std::string> sets;
  bool autostart = true;
  int line = 0;
  // running state
  child_supervisor child; // its pid, whether a pause step stopped it
  bool started_once = false;
  std::string http_host, tcp_host;
  int http_port = 0, tcp_port = 0;
  std::string out, err; // the latest start's log files
};

struct expect_item {
  std::string path; // "status", "kv_transfer_params.PATH" or a dotted path inside the response's `ordo` object
  json value;       // number, bool or string
  std::pair<uint32_t, uint32_t> at{}; // (line, column) in the file: checks report in file order
};

struct step {
  int index = 0; // 1-based
  int line = 0;
  std::string name;
  std::string action; // send | start | stop | kill | restart | pause | resume | sleep_ms | evict | metric |
                      // expect_start_failure
  std::string target; // the process (none for sleep_ms)
  // send
  bool text_prompt = false;
  std::string text;
  int64_t tokens = 0;
  uint64_t seed = 0;
  int64_t max_tokens = 8;
  json kv_params;           // kv_transfer_params = { ... } sent as it is (null: none)
  std::string kv_from;      // kv_transfer_params = "from:STEP": that step's answered object
  std::vector<expect_item> expects;
  // evict / expect_start_failure
  std::string tier;
  std::string contains;
  // sleep_ms
  int64_t sleep_ms = 0;
  // metric: the sample `metric_name{labels}` of GET /metrics, compared with `metric_value` (null: present)
  std::string metric_name;
  std::map<std::string, std::string> labels;
  json metric_value;
};

struct topology {
  std::vector<proc> procs; // stores, then nodes, then proxies, each in file order
  std::vector<step> steps;
};

std::string at_line(int line) { return "line " + std::to_string(line) + ": "; }

int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? sep : "") + v[i];
  return s;
}

void check_keys(const toml::table& t, const std::string& where, const std::vector<std::string>& allowed,
                int fallback_line) {
  for (auto&& [k, v] : t) {
    bool ok = false;
    for (auto& a : allowed)
      ok = ok || a == k.str();
    if (!ok) {
      int line = k.source().begin.line ? static_cast<int>(k.source().begin.line) : line_of(v);
      throw bad_file(at_line(line ? line : fallback_line) + "unknown key \"" + std::string(k.str()) + "\" in " +
                     where + " (allowed: " + join(allowed, ", ") + ")");
    }
  }
}

std::string need_string(const toml::table& t, const std::string& key, const std::string& where, int line) {
  auto* n = t.get(key);
  if (!n)
    throw bad_file(at_line(line) + where + " has no " + key);
  if (!n->is_string())
    throw bad_file(at_line(line_of(*n)) + where + "." + key + " must be a string");
  return n->as_string()->get();
}

int64_t need_int(const toml::node& n, const std::string& what) {
  if (!n.is_integer())
    throw bad_file(at_line(line_of(n)) + what + " must be an integer");
  return n.as_integer()->get();
}

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }
bool is_word_char(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }

// Letters, digits, '_' and '-', 1 to max_name_chars of them (checked by hand, not std::regex:
// libstdc++'s matcher recurses once per character and a long name overflowed the stack).
bool is_name(const std::string& v) {
  return !v.empty() && v.size() <= max_name_chars && std::all_of(v.begin(), v.end(), is_name_char);
}

// A `{KIND.NAME.WHICH}` in a `set` value or a `config` path: [begin, end) of the value.
struct placeholder {
  size_t begin = 0, end = 0;
  std::string kind, name, which;
};

// Every placeholder of `v`, in order. A `{` opens one when letters and a '.' follow it; one that
// opens with node., store. or proxy. and is not `{KIND.NAME.WHICH}` (nested, unclosed) throws
// bad_file with `where`. Other braces (JSON in kv_transfer.config) are left alone. Linear in v.
std::vector<placeholder> find_placeholders(const std::string& v, const std::string& where) {
  std::vector<placeholder> found;
  auto run = [&](size_t from, bool (*ok)(char)) {
    while (from < v.size() && ok(v[from]))
      ++from;
    return from;
  };
  for (size_t i = v.find('{'); i != std::string::npos; i = v.find('{', i + 1)) {
    size_t kind_end = run(i + 1, is_word_char);
    if (kind_end == i + 1 || kind_end >= v.size() || v[kind_end] != '.')
      continue;
    placeholder p;
    p.begin = i;
    p.kind = v.substr(i + 1, kind_end - i - 1);
    size_t name_end = run(kind_end + 1, is_name_char);
    size_t which_end = name_end < v.size() && v[name_end] == '.' ? run(name_end + 1, is_word_char) : name_end;
    bool closed = name_end > kind_end + 1 && which_end > name_end + 1 && which_end < v.size() && v[which_end] == '}';
    if (!closed) {
      if (p.kind == "node" || p.kind == "store" || p.kind == "proxy")
        throw bad_file(where + shown(v.substr(i)) +
                       ": a malformed placeholder (placeholders are {KIND.NAME.http|tcp} and do not nest)");
      continue;
    }
    p.name = v.substr(kind_end + 1, name_end - kind_end - 1);
    p.which = v.substr(name_end + 1, which_end - name_end - 1);
    p.end = which_end + 1;
    found.push_back(p);
    i = which_end;
  }
  return found;
}

bool is_metric_name(const std::string& v) {
  auto first = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; };
  return !v.empty() && v.size() <= 256 && first(v[0]) &&
         std::all_of(v.begin(), v.end(), [&](char c) { return first(c) || std::isdigit(static_cast<unsigned char>(c)); });
}

json toml_to_json(const toml::node& n, const std::string& what) {
  if (n.is_integer())
    return n.as_integer()->get();
  if (n.is_floating_point())
    return n.as_floating_point()->get();
  if (n.is_boolean())
    return n.as_boolean()->get();
  if (n.is_string())
    return n.as_string()->get();
  throw bad_file(at_line(line_of(n)) + what + " must be a number, a boolean or a string");
}

// A TOML value, tables and arrays too, as JSON: kv_transfer_params = { ... } is sent as written.
json toml_tree_to_json(const toml::node& n, const std::string& what) {
  if (auto* t = n.as_table()) {
    json j = json::object();
    for (auto&& [k, v] : *t)
      j[std::string(k.str())] = toml_tree_to_json(v, what + "." + std::string(k.str()));
    return j;
  }
  if (auto* a = n.as_array()) {
    json j = json::array();
    for (auto& v : *a)
      j.push_back(toml_tree_to_json(v, what + "[]"));
    return j;
  }
  return toml_to_json(n, what);
}

// ">N" / "<N": a bound that must be a number (checked when the file is read).
bool is_bound(const std::string& v) { return v.size() > 1 && (v[0] == '>' || v[0] == '<'); }

void check_bound(const std::string& v, int line, const std::string& what) {
  if (!is_bound(v))
    return;
  char* endp = nullptr;
  std::strtod(v.c_str() + 1, &endp);
  if (*endp != '\0')
    throw bad_file(at_line(line) + what + " = \"" + v + "\": expected a number after " + v[0]);
}

// `expect = { "from.store" = ">0" }` and `expect = { from = { store = ">0" } }` mean the same.
void flatten_expect(const toml::table& t, const std::string& prefix, std::vector<expect_item>& out) {
  for (auto&& [k, v] : t) {
    std::string path = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (auto* sub = v.as_table())
      flatten_expect(*sub, path, out);
    else
      out.push_back({path, toml_to_json(v, "expect." + path), {k.source().begin.line, k.source().begin.column}});
  }
}

// What a step's parser reads beyond its own keys: the processes by name, and the send steps named
// before it (kv_transfer_params = "from:STEP", expect = { ... = "same_as:STEP" }).
struct step_context {
  topology& topo;
  const std::map<std::string, int>& proc_index;
  const std::map<std::string, const step*>& named;

  proc& find_proc(const std::string& name, int line, const std::string& what) const {
    auto f = proc_index.find(name);
    if (f == proc_index.end())
      throw bad_file(at_line(line) + what + " \"" + name + "\" names no [[store]], [[node]] or [[proxy]]");
    return topo.procs[f->second];
  }
};

// start, stop, kill, restart, pause, resume = NAME: the process the step acts on.
void parse_process_step(const step_context& in, const toml::table& t, const toml::node& a, step& s,
                        const std::string& where) {
  if (!a.is_string())
    throw bad_file(at_line(line_of(a)) + where + "." + s.action + " must name a process");
  s.target = in.find_proc(a.as_string()->get(), line_of(a), s.action).name;
}

// send = { node | proxy = NAME, prompt = TEXT | { tokens = N, seed = S }, max_tokens = N,
//          kv_transfer_params = { ... } | "from:STEP" }, with expect = { ... } beside it.
void parse_send(const step_context& in, const toml::table& t, const toml::node& a, step& s,
                const std::string& where) {
  auto* st = a.as_table();
  if (!st)
    throw bad_file(at_line(line_of(a)) + where +
                   ".send must be a table: { node = NAME, prompt = ..., max_tokens = N }");
  check_keys(*st, where + ".send", {"node", "proxy", "prompt", "max_tokens", "kv_transfer_params"},
             line_of(a));
  if (!!st->get("node") == !!st->get("proxy"))
    throw bad_file(at_line(line_of(a)) + where + ".send needs exactly one of node, proxy");
  std::string key = st->get("node") ? "node" : "proxy";
  const toml::node& tn = *st->get(key);
  if (!tn.is_string())
    throw bad_file(at_line(line_of(tn)) + where + ".send." + key + " must name a [[" + key + "]]");
  proc& p = in.find_proc(tn.as_string()->get(), line_of(tn), "send." + key);
  if (kind_name(p.kind) != key)
    throw bad_file(at_line(line_of(tn)) + where + ".send." + key + " = \"" + p.name + "\" is a [[" +
                   kind_name(p.kind) + "]]");
  s.target = p.name;
  auto* pr = st->get("prompt");
  if (!pr)
    throw bad_file(at_line(line_of(a)) + where + ".send has no prompt");
  if (pr->is_string()) {
    s.text_prompt = true;
    s.text = pr->as_string()->get();
  } else if (auto* pt = pr->as_table()) {
    check_keys(*pt, where + ".send.prompt", {"tokens", "seed"}, line_of(*pr));
    if (!pt->get("tokens"))
      throw bad_file(at_line(line_of(*pr)) + where + ".send.prompt has no tokens");
    s.tokens = need_int(*pt->get("tokens"), where + ".send.prompt.tokens");
    if (s.tokens < 1 || s.tokens > 1000000)
      throw bad_file(at_line(line_of(*pt->get("tokens"))) + where +
                     ".send.prompt.tokens must be between 1 and 1000000");
    if (auto* sd = pt->get("seed"))
      s.seed = static_cast<uint64_t>(need_int(*sd, where + ".send.prompt.seed"));
  } else {
    throw bad_file(at_line(line_of(*pr)) + where +
                   ".send.prompt must be a string or { tokens = N, seed = S }");
  }
  if (auto* mt = st->get("max_tokens")) {
    s.max_tokens = need_int(*mt, where + ".send.max_tokens");
    if (s.max_tokens < 1)
      throw bad_file(at_line(line_of(*mt)) + where + ".send.max_tokens must be at least 1");
  }
  if (auto* kv = st->get("kv_transfer_params")) {
    std::string what = where + ".send.kv_transfer_params";
    if (kv->is_table()) {
      s.kv_params = toml_tree_to_json(*kv, what);
    } else if (kv->is_string() && kv->as_string()->get().rfind("from:", 0) == 0) {
      s.kv_from = kv->as_string()->get().substr(5);
      if (!in.named.count(s.kv_from))
        throw bad_file(at_line(line_of(*kv)) + what + " = \"from:" + s.kv_from +
                       "\": no earlier send step is named \"" + s.kv_from + "\"");
    } else {
      throw bad_file(at_line(line_of(*kv)) + what + " must be a table { ... } or \"from:STEP\"");
    }
  }
  if (auto* ex = t.get("expect")) {
    auto* et = ex->as_table();
    if (!et)
      throw bad_file(at_line(line_of(*ex)) + where + ".expect must be a table");
    flatten_expect(*et, "", s.expects); // toml++ iterates keys sorted: restore the file's order
    std::stable_sort(s.expects.begin(), s.expects.end(),
                     [](const expect_item& x, const expect_item& y) { return x.at < y.at; });
    for (auto& e : s.expects) {
      if (!e.value.is_string())
        continue;
      std::string v = e.value.get<std::string>();
      for (std::string prefix : {"same_as:", "differs_from:"})
        if (v.rfind(prefix, 0) == 0) {
          std::string other = v.substr(prefix.size());
          if (!in.named.count(other))
            throw bad_file(at_line(line_of(*ex)) + where + ".expect." + e.path + " = \"" + v +
                           "\": no earlier send step is named \"" + other + "\"");
        }
      check_bound(v, line_of(*ex), where + ".expect." + e.path);
    }
  }
}

// evict = { node = NAME, tier = "hbm" | "cpu" | "store" }.
void parse_evict(const step_context& in, const toml::table& t, const toml::node& a, step& s,
                 const std::string& where) {
  auto* et = a.as_table();
  if (!et)
    throw bad_file(at_line(line_of(a)) + where + ".evict must be { node = NAME, tier = \"hbm\" }");
  check_keys(*et, where + ".evict", {"node", "tier"}, line_of(a));
  proc& p = in.find_proc(need_string(*et, "node", where + ".evict", line_of(a)), line_of(a), "evict.node");
  if (p.kind != proc_kind::node)
    throw bad_file(at_line(line_of(a)) + where + ".evict.node = \"" + p.name + "\" is a [[" +
                   kind_name(p.kind) + "]]");
  s.target = p.name;
  s.tier = need_string(*et, "tier", where + ".evict", line_of(a));
  if (s.tier != "hbm" && s.tier != "cpu" && s.tier != "store")
    throw bad_file(at_line(line_of(*et->get("tier"))) + where + ".evict.tier = \"" + s.tier +
                   "\": must be one of hbm, cpu, store");
}

// sleep_ms = N.
void parse_sleep_ms(const step_context& in, const toml::table& t, const toml::node& a, step& s,
                    const std::string& where) {
  s.sleep_ms = need_int(a, where + ".sleep_ms");
  if (s.sleep_ms < 1 || s.sleep_ms > sleep_limit_ms)
    throw bad_file(at_line(line_of(a)) + where + ".sleep_ms = " + std::to_string(s.sleep_ms) +
                   ": must be between 1 and " + std::to_string(sleep_limit_ms));
}

// metric = { node | store | proxy = NAME, name = METRIC, labels = { ... }, value = V }.
void parse_metric(const step_context& in, const toml::table& t, const toml::node& a, step& s,
                  const std::string& where) {
  std::string what = where + ".metric";
  auto* mt = a.as_table();
  if (!mt)
    throw bad_file(at_line(line_of(a)) + what +
                   " must be { node = NAME, name = METRIC, labels = { ... }, value = V }");
  check_keys(*mt, what, {"node", "store", "proxy", "name", "labels", "value"}, line_of(a));
  int keys = !!mt->get("node") + !!mt->get("store") + !!mt->get("proxy");
  if (keys != 1)
    throw bad_file(at_line(line_of(a)) + what + " needs exactly one of node, store, proxy");
  std::string key = mt->get("node") ? "node" : mt->get("store") ? "store" : "proxy";
  proc& p = in.find_proc(need_string(*mt, key, what, line_of(a)), line_of(a), "metric." + key);
  if (kind_name(p.kind) != key)
    throw bad_file(at_line(line_of(a)) + what + "." + key + " = \"" + p.name + "\" is a [[" +
                   kind_name(p.kind) + "]]");
  s.target = p.name;
  s.metric_name = need_string(*mt, "name", what, line_of(a));
  if (!is_metric_name(s.metric_name))
    throw bad_file(at_line(line_of(*mt->get("name"))) + what + ".name = \"" + shown(s.metric_name) +
                   "\": not a Prometheus metric name (at most 256 characters)");
  if (auto* lb = mt->get("labels")) {
    auto* lt = lb->as_table();
    if (!lt)
      throw bad_file(at_line(line_of(*lb)) + what + ".labels must be a table of strings { label = \"value\" }");
    for (auto&& [k, v] : *lt) {
      if (!v.is_string())
        throw bad_file(at_line(line_of(v)) + what + ".labels." + std::string(k.str()) + " must be a string");
      s.labels[std::string(k.str())] = v.as_string()->get();
    }
  }
  if (auto* v = mt->get("value")) {
    if (v->is_integer() || v->is_floating_point()) {
      s.metric_value = toml_to_json(*v, what + ".value");
    } else if (v->is_string() && is_bound(v->as_string()->get())) {
      s.metric_value = v->as_string()->get();
      check_bound(s.metric_value.get<std::string>(), line_of(*v), what + ".value");
    } else {
      throw bad_file(at_line(line_of(*v)) + what + ".value must be a number, \">N\" or \"<N\"");
    }
  }
}

// expect_start_failure = { node | store | proxy = NAME, contains = TEXT }: a process of start = false.
void parse_expect_start_failure(const step_context& in, const toml::table& t, const toml::node& a, step& s,
                                const std::string& where) {
  auto* et = a.as_table();
  if (!et)
    throw bad_file(at_line(line_of(a)) + where +
                   ".expect_start_failure must be { node = NAME, contains = TEXT }");
  check_keys(*et, where + ".expect_start_failure", {"node", "store", "proxy", "contains"}, line_of(a));
  int keys = !!et->get("node") + !!et->get("store") + !!et->get("proxy");
  if (keys != 1)
    throw bad_file(at_line(line_of(a)) + where + ".expect_start_failure needs exactly one of node, store, proxy");
  std::string key = et->get("node") ? "node" : et->get("store") ? "store" : "proxy";
  proc& p = in.find_proc(need_string(*et, key, where + ".expect_start_failure", line_of(a)), line_of(a),
                      "expect_start_failure." + key);
  if (kind_name(p.kind) != key)
    throw bad_file(at_line(line_of(a)) + where + ".expect_start_failure." + key + " = \"" + p.name +
                   "\" is a [[" + kind_name(p.kind) + "]]");
  if (p.autostart)
    throw bad_file(at_line(line_of(a)) + where + ".expect_start_failure: [[" + key + "]] \"" + p.name +
                   "\" must have start = false");
  s.target = p.name;
  if (et->get("contains"))
    s.contains = need_string(*et, "contains", where + ".expect_start_failure", line_of(a));
}

// The actions of a [[step]], one key each, in the order messages list them: a step has exactly one,
// and its parser fills the step from that key's value (`a`) and the step's table (`t`).
struct step_action {
  const char* name;
  void (*parse)(const step_context& in, const toml::table& t, const toml::node& a, step& s, const std::string& where);
};

const step_action step_actions[] = {
    {"send", parse_send},
    {"start", parse_process_step},
    {"stop", parse_process_step},
    {"kill", parse_process_step},
    {"restart", parse_process_step},
    {"pause", parse_process_step},
    {"resume", parse_process_step},
    {"sleep_ms", parse_sleep_ms},
    {"evict", parse_evict},
    {"metric", parse_metric},
    {"expect_start_failure", parse_expect_start_failure},
};


topology parse_topology(const std::string& file) {
  toml::table root;
  // Read once through one descriptor, bounded: the file checked is the file parsed.
  std::string text;
  {
    int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw bad_file(std::string("cannot open it: ") + std::strerror(errno));
    struct stat st {};
    bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    if (regular) {
      text.resize(max_file_bytes + 1);
      size_t got = 0;
      ssize_t n = 0;
      while (got < text.size() && (n = ::read(fd, text.data() + got, text.size() - got)) != 0) {
        if (n < 0 && errno == EINTR)
          continue;
        if (n < 0)
          break;
        got += static_cast<size_t>(n);
      }
      text.resize(got);
    }
    ::close(fd);
    if (!regular)
      throw bad_file("not a regular file (a topology is a regular file of at most 1 MiB)");
    if (text.size() > max_file_bytes)
      throw bad_file("over the limit of " + std::to_string(max_file_bytes) + " bytes (1 MiB) for a topology file");
  }
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    throw bad_file(at_line(static_cast<int>(e.source().begin.line)) + "TOML syntax error, column " +
                   std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
  check_keys(root, "the file", {"store", "node", "proxy", "step"}, 1);

  topology topo;
  std::map<std::string, int> proc_index;
  for (proc_kind kind : {proc_kind::store, proc_kind::node, proc_kind::proxy}) {
    std::string section = kind_name(kind);
    auto* n = root.get(section);
    if (!n)
      continue;
    auto* arr = n->as_array();
    if (!arr || !arr->is_array_of_tables())
      throw bad_file(at_line(line_of(*n)) + section + " must be an array of tables: [[" + section + "]]");
    for (auto& elem : *arr) {
      auto& t = *elem.as_table();
      int line = line_of(elem);
      std::string where = "[[" + section + "]]";
      check_keys(t, where, {"name", "config", "set", "start"}, line);
      proc p;
      p.kind = kind;
      p.line = line;
      p.name = need_string(t, "name", where, line);
      if (!is_name(p.name))
        throw bad_file(at_line(line_of(*t.get("name"))) + where + ".name \"" + shown(p.name) +
                       "\": use 1 to " + std::to_string(max_name_chars) + " letters, digits, '_' and '-'");
      if (proc_index.count(p.name))
        throw bad_file(at_line(line_of(*t.get("name"))) + "a process named \"" + p.name +
                       "\" already exists (names are unique across [[store]], [[node]], [[proxy]])");
      where += " \"" + p.name + "\"";
      if (t.get("config"))
        p.config = need_string(t, "config", where, line);
      else if (kind == proc_kind::store)
        p.config = "configs/store.toml";
      else
        throw bad_file(at_line(line) + where + " has no config");
      // A path with a placeholder is checked when it is expanded, at the start.
      if (p.config.find('{') == std::string::npos) {
        std::string problem = file_problem(p.config);
        if (!problem.empty())
          throw bad_file(at_line(t.get("config") ? line_of(*t.get("config")) : line) + where + ".config = \"" +
                         shown(p.config) + "\": " + problem);
      }
      if (auto* s = t.get("set")) {
        auto* sa = s->as_array();
        if (!sa)
          throw bad_file(at_line(line_of(*s)) + where + ".set must be an array of \"key=value\" strings");
        for (auto& item : *sa) {
          if (!item.is_string())
            throw bad_file(at_line(line_of(item)) + where + ".set must be an array of \"key=value\" strings");
          std::string v = item.as_string()->get();
          if (v.find('=') == std::string::npos)
            throw bad_file(at_line(line_of(item)) + where + ".set \"" + v + "\": expected section.key=value");
          p.sets.push_back(v);
        }
      }
      if (auto* s = t.get("start")) {
        if (!s->is_boolean())
          throw bad_file(at_line(line_of(*s)) + where + ".start must be true or false");
        p.autostart = s->as_boolean()->get();
      }
      proc_index[p.name] = static_cast<int>(topo.procs.size());
      topo.procs.push_back(std::move(p));
    }
  }
  // Placeholders must be well formed and name a process of that kind (whether it has been
  // started is known only when one is expanded). Other braces (JSON in kv_transfer.config) stay.
  for (auto& p : topo.procs) {
    std::vector<std::pair<std::string, std::string>> values; // (key, value)
    for (auto& v : p.sets)
      values.push_back({"set \"" + shown(v) + "\"", v});
    values.push_back({"config", p.config});
    for (auto& [key, v] : values) {
      std::string where = at_line(p.line) + "[[" + kind_name(p.kind) + "]] \"" + p.name + "\" " + key + ": ";
      for (auto& ph : find_placeholders(v, where)) {
        std::string text = shown(v.substr(ph.begin, ph.end - ph.begin));
        if ((ph.kind != "node" && ph.kind != "store" && ph.kind != "proxy") ||
            (ph.which != "http" && ph.which != "tcp") || (ph.kind == "proxy" && ph.which == "tcp"))
          throw bad_file(where + text + ": placeholders are {node.NAME.http}, {node.NAME.tcp}, "
                                        "{store.NAME.http}, {store.NAME.tcp}, {proxy.NAME.http}");
        auto f = proc_index.find(ph.name);
        if (f == proc_index.end() || kind_name(topo.procs[f->second].kind) != ph.kind)
          throw bad_file(where + text + " names no [[" + ph.kind + "]]");
      }
    }
  }


  std::map<std::string, const step*> named; // earlier named send steps
  std::set<std::string> step_names;
  if (auto* n = root.get("step")) {
    auto* arr = n->as_array();
    if (!arr || !arr->is_array_of_tables())
      throw bad_file(at_line(line_of(*n)) + "step must be an array of tables: [[step]]");
    topo.steps.reserve(arr->size());
    for (auto& elem : *arr) {
      auto& t = *elem.as_table();
      step s;
      s.index = static_cast<int>(topo.steps.size()) + 1;
      s.line = line_of(elem);
      std::string where = "[[step]] " + std::to_string(s.index);
      std::vector<std::string> actions;
      for (const step_action& act : step_actions)
        actions.push_back(act.name);
      std::vector<std::string> allowed = actions;
      allowed.insert(allowed.begin(), "name");
      allowed.push_back("expect");
      check_keys(t, where, allowed, s.line);
      if (auto* nm = t.get("name")) {
        if (!nm->is_string() || nm->as_string()->get().empty() || nm->as_string()->get().size() > max_name_chars)
          throw bad_file(at_line(line_of(*nm)) + where + ".name must be a string of 1 to " +
                         std::to_string(max_name_chars) + " characters");
        s.name = nm->as_string()->get();
        if (!step_names.insert(s.name).second)
          throw bad_file(at_line(line_of(*nm)) + "a step named \"" + s.name + "\" already exists");
        where = "[[step]] \"" + s.name + "\"";
      }
      std::vector<std::string> present;
      for (auto& a : actions)
        if (t.get(a))
          present.push_back(a);
      if (present.size() != 1)
        throw bad_file(at_line(s.line) + where + " needs exactly one of " + join(actions, ", ") +
                       (present.empty() ? " (it has none)" : " (it has " + join(present, ", ") + ")"));
      s.action = present[0];
      const toml::node& a = *t.get(s.action);
      if (t.get("expect") && s.action != "send")
        throw bad_file(at_line(line_of(*t.get("expect"))) + where + ": expect goes with send only");
      const step_context in{topo, proc_index, named};
      for (const step_action& act : step_actions)
        if (s.action == act.name)
          act.parse(in, t, a, s, where);
      topo.steps.push_back(std::move(s));
      if (topo.steps.back().action == "send" && !topo.steps.back().name.empty())
        named[topo.steps.back().name] = &topo.steps.back();
    }
  }
  return topo;
}

// ------------------------------------------------------------------------------------------
// The runner (prompts: tools/seeded_prompt.hpp)

struct record {
  int status = 0;
  json body;          // null when the body is not JSON
  double wall_ms = 0; // request sent → whole answer read, as the runner saw it
};

struct step_result {
  bool ok = false;
  std::string text; // what happened (ok) or what failed
};

class runner {
public:
  runner(topology topo, std::string dir) : topo_(std::move(topo)), dir_(std::move(dir)) {}

  proc* find(const std::string& name) {
    for (auto& p : topo_.procs)
      if (p.name == name)
        return &p;
    return nullptr;
  }

  std::vector<proc>& procs() { return topo_.procs; }
  const std::vector<step>& steps() const { return topo_.steps; }

  // Reaps `p` if it exited; returns true while it runs.
  bool alive(proc& p, int* status = nullptr) {
    if (p.child.pid() <= 0)
      return false;
    int st = 0;
    if (p.child.alive(&st))
      return true;
    if (status)
      *status = st;
    last_status_[p.name] = st;
    return false;
  }

  std::string exited_text(const proc& p) {
    auto f = last_status_.find(p.name);
    return f == last_status_.end() ? "not running" : "not running (" + describe_status(f->second) + ")";
  }

  // `{node.a.http}` → `127.0.0.1:PORT` of a process started at least once.
  bool expand(const std::string& in, std::string& out, std::string& why) {
    out.clear();
    size_t last = 0;
    for (auto& ph : find_placeholders(in, "")) { // well formed: parse_topology checked every value
      std::string text = in.substr(ph.begin, ph.end - ph.begin);
      out += in.substr(last, ph.begin - last);
      last = ph.end;
      proc* p = find(ph.name);
      if (!p || kind_name(p->kind) != ph.kind) {
        why = text + ": no [[" + ph.kind + "]] named \"" + ph.name + "\"";
        return false;
      }
      if (!p->started_once) {
        why = text + ": " + ph.kind + " " + ph.name + " has not been started";
        return false;
      }
      if (ph.which == "tcp" && p->tcp_port == 0) {
        why = text + ": " + ph.kind + " " + ph.name + " printed no tcp:// endpoint";
        return false;
      }
      out += ph.which == "http" ? p->http_host + ":" + std::to_string(p->http_port)
                                : p->tcp_host + ":" + std::to_string(p->tcp_port);
    }
    out += in.substr(last);
    return true;
  }

  // Starts `child`; false (with why) when it could not.
  bool spawn(child_supervisor& child, const std::vector<std::string>& args, const std::string& out,
             const std::string& err, std::string& why) {
    int ofd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int efd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int nfd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (ofd < 0 || efd < 0 || nfd < 0) {
      why = std::string("cannot create its log files in ") + dir_ + ": " + std::strerror(errno);
      for (int fd : {ofd, efd, nfd})
        if (fd >= 0)
          ::close(fd);
      return false;
    }
    // The child dies with the runner even if the runner is killed with SIGKILL.
    const bool started = child.start(args, nfd, ofd, efd, "ordo topo run");
    int saved = errno;
    ::close(ofd);
    ::close(efd);
    ::close(nfd);
    if (!started)
      why = std::string("fork: ") + std::strerror(saved);
    return started;
  }

  enum class ready { yes, exited, timed_out, interrupted };

  // Waits for p's ready line; fills its endpoints.
  ready wait_ready(proc& p, int& status) {
    static const std::regex line_re(R"(^listening on http://([^\s]+):([0-9]+)(?: tcp://([^\s]+):([0-9]+))?\s*$)");
    auto t0 = clock_type::now();
    for (;;) {
      std::string text = read_tail(p.out); // one line: the ready line
      size_t pos = 0;
      while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        if (nl == std::string::npos)
          break; // an incomplete line: read again
        std::string line = text.substr(pos, nl - pos);
        pos = nl + 1;
        std::smatch m;
        if (line.size() <= 512 && std::regex_match(line, m, line_re)) { // std::regex recurses per character
          p.http_host = m[1];
          p.http_port = std::stoi(m[2]);
          if (m[3].matched) {
            p.tcp_host = m[3];
            p.tcp_port = std::stoi(m[4]);
          } else {
            p.tcp_host.clear();
            p.tcp_port = 0;
          }
          return ready::yes;
        }
      }
      if (!alive(p, &status))
        return ready::exited;
      if (g_signal)
        return ready::interrupted;
      if (since(t0) > ready_limit_s)
        return ready::timed_out;
      sleep_s(0.02);
    }
  }

  // Sends `sig`, waits up to `limit_s` for the exit, then SIGKILL. Returns true if it exited in
  // time (its status in `how`).
  bool stop_proc(proc& p, int sig, double limit_s, std::string& how) {
    int st = 0;
    if (!alive(p, &st)) {
      how = "was already " + exited_text(p);
      return true;
    }
    const auto stopped = p.child.stop(sig, limit_s, &st);
    if (p.child.pid() <= 0)
      last_status_[p.name] = st;
    if (stopped != child_supervisor::stop_result::killed) {
      how = describe_status(st);
      return true;
    }
    how = "did not exit within " + std::to_string(static_cast<int>(limit_s)) + " s after " + sig_text(sig) +
          "; sent SIGKILL" + (p.child.pid() > 0 ? " (still not reaped)" : "");
    return false;
  }

  std::vector<std::string> command(const proc& p, const std::string& config, const std::vector<std::string>& sets,
                                   bool keep_ports) {
    std::vector<std::string> args = {"ordo", kind_name(p.kind), "--config", config};
    for (auto& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    if (p.kind == proc_kind::store) {
      args.push_back("--set");
      args.push_back("store.http_port=" + std::to_string(keep_ports ? p.http_port : 0));
      args.push_back("--port");
      args.push_back(std::to_string(keep_ports ? p.tcp_port : 0));
    } else {
      args.push_back("--port");
      args.push_back(std::to_string(keep_ports ? p.http_port : 0));
    }
    return args;
  }

  std::string endpoints(const proc& p) {
    std::string s = "pid " + std::to_string(p.child.pid()) + " http://" + p.http_host + ":" + std::to_string(p.http_port);
    if (p.tcp_port)
      s += " tcp://" + p.tcp_host + ":" + std::to_string(p.tcp_port);
    return s;
  }

  // Starts `p` (on its previous ports with keep_ports) and waits for its ready line. With
  // `expect_failure`, the start passes when the process exits non-zero first.
  enum class start_outcome { ready, failed, interrupted };
  start_outcome start_proc(proc& p, bool keep_ports, std::string& msg) {
    if (alive(p)) {
      msg = std::string(kind_name(p.kind)) + " " + p.name + " is already running (pid " + std::to_string(p.child.pid()) + ")";
      return start_outcome::failed;
    }
    std::string config, why;
    std::vector<std::string> sets;
    if (!expand(p.config, config, why)) {
      msg = "config: " + why;
      return start_outcome::failed;
    }
    if (std::string problem = file_problem(config); !problem.empty()) {
      msg = "config = \"" + shown(config) + "\": " + problem;
      return start_outcome::failed;
    }
    for (auto& s : p.sets) {
      std::string e;
      if (!expand(s, e, why)) {
        msg = "set \"" + s + "\": " + why;
        return start_outcome::failed;
      }
      sets.push_back(e);
    }
    auto args = command(p, config, sets, keep_ports);
    auto t0 = clock_type::now();
    for (;;) {
      launch(p, args, why);
      if (p.child.pid() < 0) {
        msg = why;
        return start_outcome::failed;
      }
      int st = 0;
      switch (wait_ready(p, st)) {
      case ready::yes:
        p.started_once = true;
        msg = endpoints(p);
        return start_outcome::ready;
      case ready::interrupted: {
        std::string how;
        stop_proc(p, SIGTERM, 10, how);
        msg = std::string("interrupted by ") + sig_text(g_signal);
        return start_outcome::interrupted;
      }
      case ready::timed_out: {
        std::string how;
        stop_proc(p, SIGTERM, 5, how);
        msg = "no ready line within " + std::to_string(static_cast<int>(ready_limit_s)) + " s (stopped: " + how +
              "); log " + p.err;
        return start_outcome::failed;
      }
      case ready::exited:
        // A port kept across a restart may still be held (TIME_WAIT, a slow exit): retry a while.
        if (keep_ports && since(t0) < rebind_limit_s &&
            read_tail(p.err).find("cannot listen") != std::string::npos) {
          sleep_s(0.25);
          continue;
        }
        msg = describe_status(st) + " before its ready line: " + last_line(p.err);
        return start_outcome::failed;
      }
    }
  }

  void launch(proc& p, const std::vector<std::string>& args, std::string& why) {
    ++launches_;
    char prefix[16];
    std::snprintf(prefix, sizeof prefix, "%02d-", launches_);
    p.out = dir_ + "/" + prefix + p.name + ".out";
    p.err = dir_ + "/" + prefix + p.name + ".err";
    {
      std::ofstream cmd(dir_ + "/" + prefix + p.name + ".cmd");
      for (auto& a : args)
        cmd << a << "\n";
    }
    spawn(p.child, args, p.out, p.err, why);
  }

  // One HTTP request with a total deadline; the main thread watches the stop flag meanwhile.
  http_response request(int port, const std::string& method, const std::string& path, const std::string& body) {
    http_response r;
    http_client c(port, static_cast<int>(http_limit_s) + 10);
    if (!c.connected()) {
      r.error = c.error();
      return r;
    }
    std::atomic<bool> done{false};
    std::thread t([&] {
      r = c.request(method, path, body);
      done = true;
    });
    auto t0 = clock_type::now();
    std::string cancelled;
    while (!done) {
      if (g_signal && cancelled.empty())
        cancelled = std::string("interrupted by ") + sig_text(g_signal);
      if (since(t0) > http_limit_s && cancelled.empty())
        cancelled = "no answer within " + std::to_string(static_cast<int>(http_limit_s)) + " s";
      if (!cancelled.empty()) {
        ::shutdown(c.fd(), SHUT_RDWR);
        break;
      }
      sleep_s(0.01);
    }
    t.join();
    if (!cancelled.empty()) {
      r.status = 0;
      r.error = cancelled;
    }
    return r;
  }

  bool require_running(proc& p, std::string& msg) {
    if (alive(p))
      return true;
    msg = std::string(kind_name(p.kind)) + " " + p.name + " is " +
          (p.started_once ? exited_text(p) + (p.err.empty() ? "" : ": " + last_line(p.err)) : "not started");
    return false;
  }

  // `status`; `kv_transfer_params.PATH` inside the answer's kv_transfer_params object; any other
  // path inside its `ordo` object.
  static std::optional<json> value_at(const record& r, const std::string& path) {
    if (path == "status")
      return json(r.status);
    static const std::string kv_prefix = "kv_transfer_params.";
    bool kv = path.rfind(kv_prefix, 0) == 0;
    const char* top = kv ? "kv_transfer_params" : "ordo";
    if (!r.body.is_object() || !r.body.contains(top))
      return std::nullopt;
    const json* cur = &r.body[top];
    std::string rest = kv ? path.substr(kv_prefix.size()) : path == "digest" ? "logits_digest" : path;
    size_t pos = 0;
    while (pos <= rest.size()) {
      size_t dot = rest.find('.', pos);
      std::string part = rest.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
      if (!cur->is_object() || !cur->contains(part))
        return std::nullopt;
      cur = &(*cur)[part];
      if (dot == std::string::npos)
        break;
      pos = dot + 1;
    }
    return *cur;
  }

  static std::string show(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

  static bool same(const json& a, const json& b) {
    if (a.is_number() && b.is_number())
      return a.get<double>() == b.get<double>();
    return a == b;
  }

  // The comparison of expect and metric: a number equal, ">N" / "<N" as numbers, any other
  // string or a boolean equal.
  static bool matches(const json& actual, const json& expected) {
    if (expected.is_string()) {
      std::string v = expected.get<std::string>();
      if (is_bound(v)) {
        if (!actual.is_number())
          return false;
        double x = actual.get<double>(), bound = std::strtod(v.c_str() + 1, nullptr);
        return v[0] == '>' ? x > bound : x < bound;
      }
      return show(actual) == v;
    }
    return same(actual, expected);
  }

  static std::string expected_text(const json& expected) {
    if (expected.is_string() && !is_bound(expected.get<std::string>()))
      return "\"" + expected.get<std::string>() + "\"";
    return show(expected);
  }

  std::vector<std::string> check_expectations(const step& s, const record& r) {
    std::vector<std::string> bad;
    bool status_expected = false;
    for (auto& e : s.expects) {
      if (e.path == "status")
        status_expected = true;
      auto actual = value_at(r, e.path);
      std::string got = actual ? show(*actual) : "missing";
      if (e.value.is_string()) {
        std::string v = e.value.get<std::string>();
        bool cmp_same = v.rfind("same_as:", 0) == 0, cmp_diff = v.rfind("differs_from:", 0) == 0;
        if (cmp_same || cmp_diff) {
          std::string other = v.substr(v.find(':') + 1);
          auto rec = records_.find(other);
          if (rec == records_.end()) {
            bad.push_back(e.path + ": step " + other + " has no recorded answer");
            continue;
          }
          auto theirs = value_at(rec->second, e.path);
          if (!theirs) {
            bad.push_back(e.path + " missing in step " + other + "'s answer");
            continue;
          }
          if (!actual) {
            bad.push_back(e.path + " missing, expected " + v + " (" + show(*theirs) + ")");
            continue;
          }
          bool eq = same(*actual, *theirs);
          if (cmp_same && !eq)
            bad.push_back(e.path + " = " + got + ", expected same as " + other + " (" + show(*theirs) + ")");
          if (cmp_diff && eq)
            bad.push_back(e.path + " = " + got + ", expected to differ from " + other);
          continue;
        }
      }
      if (!actual || !matches(*actual, e.value))
        bad.push_back(e.path + " = " + got + ", expected " + expected_text(e.value));
    }
    if (!status_expected && r.status != 200)
      bad.insert(bad.begin(), "status = " + std::to_string(r.status) + ", expected 200");
    return bad;
  }

  static std::string summary(const record& r) {
    std::string s = std::to_string(r.status);
    if (r.status != 200) {
      if (r.body.is_object() && r.body.contains("error") && r.body["error"].is_object() &&
          r.body["error"].contains("message"))
        s += " " + show(r.body["error"]["message"]);
      return s;
    }
    if (!r.body.is_object() || !r.body.contains("ordo") || !r.body["ordo"].is_object())
      return s + " (no ordo object)";
    const json& o = r.body["ordo"];
    if (o.contains("resume_at"))
      s += " resume_at=" + show(o["resume_at"]);
    if (o.contains("from") && o["from"].is_object())
      for (auto& [k, v] : o["from"].items())
        if (!(v.is_number() && v.get<double>() == 0))
          s += " from." + k + "=" + show(v);
    if (o.contains("logits_digest"))
      s += " digest=" + show(o["logits_digest"]);
    return s;
  }

  static std::string ms_text(double ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, ms == std::floor(ms) && std::fabs(ms) < 1e15 ? "%.0f" : "%.1f", ms);
    return buf;
  }

  // summary() plus the answer's timings (every number `ordo.*_ms`, e.g. duration_ms), the
  // runner's wall time and the kv_transfer_params the answer carried.
  static std::string send_summary(const record& r) {
    std::string s = summary(r);
    if (r.body.is_object() && r.body.contains("ordo") && r.body["ordo"].is_object())
      for (auto& [k, v] : r.body["ordo"].items())
        if (v.is_number() && k.size() > 3 && k.compare(k.size() - 3, 3, "_ms") == 0)
          s += " " + k + "=" + ms_text(v.get<double>());
    s += " wall_ms=" + ms_text(std::round(r.wall_ms));
    if (r.body.is_object() && r.body.contains("kv_transfer_params"))
      s += " kv_transfer_params=" + r.body["kv_transfer_params"].dump();
    return s;
  }

  // A paused process answers nothing until it is resumed: requests to it fail at once instead of
  // waiting for their limit.
  bool require_unpaused(proc& p, std::string& msg) {
    if (!p.child.paused())
      return true;
    msg = std::string(kind_name(p.kind)) + " " + p.name + " is paused (pid " + std::to_string(p.child.pid()) +
          ", SIGSTOP): resume it first";
    return false;
  }

  step_result run_send(const step& s) {
    proc& p = *find(s.target);
    std::string what = "send " + std::string(kind_name(p.kind)) + " " + p.name;
    std::string msg;
    if (!require_running(p, msg) || !require_unpaused(p, msg))
      return {false, what + ": " + msg};
    json body;
    if (s.text_prompt)
      body["prompt"] = s.text;
    else
      body["prompt"] = seeded_prompt(s.tokens, s.seed);
    body["max_tokens"] = s.max_tokens;
    body["temperature"] = 0;
    if (!s.kv_params.is_null())
      body["kv_transfer_params"] = s.kv_params;
    if (!s.kv_from.empty()) {
      auto rec = records_.find(s.kv_from);
      if (rec == records_.end())
        return {false, what + ": kv_transfer_params = \"from:" + s.kv_from + "\": step " + s.kv_from +
                           " has no recorded answer"};
      const json& b = rec->second.body;
      if (!b.is_object() || !b.contains("kv_transfer_params") || !b["kv_transfer_params"].is_object())
        return {false, what + ": kv_transfer_params = \"from:" + s.kv_from + "\": step " + s.kv_from +
                           "'s answer (status " + std::to_string(rec->second.status) +
                           ") has no kv_transfer_params object"};
      body["kv_transfer_params"] = b["kv_transfer_params"];
    }
    auto t0 = clock_type::now();
    http_response resp = request(p.http_port, "POST", "/v1/completions", body.dump());
    double wall_ms = since(t0) * 1000;
    if (resp.status == 0) {
      std::string died;
      if (!alive(p))
        died = "; " + std::string(kind_name(p.kind)) + " " + p.name + " is " + exited_text(p) + ": " + last_line(p.err);
      return {false, what + ": no answer: " + resp.error + died};
    }
    record r;
    r.status = resp.status;
    r.wall_ms = wall_ms;
    r.body = json::parse(resp.body, nullptr, false);
    if (r.body.is_discarded())
      r.body = nullptr;
    if (!s.name.empty())
      records_[s.name] = r;
    auto bad = check_expectations(s, r);
    if (!bad.empty())
      return {false, (s.name.empty() ? what + ": " : "") + join(bad, "; ") +
                         (r.status != 200 ? " (" + summary(r) + ")" : "")};
    return {true, what + ": " + send_summary(r)};
  }

  // The state letter of /proc/PID/stat ('T' stopped, 'R' / 'S' running or sleeping); 0 if unreadable.
  static char proc_state(pid_t pid) {
    std::string stat = read_tail("/proc/" + std::to_string(pid) + "/stat");
    auto paren = stat.rfind(')'); // the command name may contain spaces and parentheses
    return paren == std::string::npos || paren + 2 >= stat.size() ? 0 : stat[paren + 2];
  }

  // SIGSTOP (pause) or SIGCONT (resume), then waits until /proc shows the process stopped or not.
  step_result pause_or_resume(proc& p, bool pause, const std::string& what) {
    std::string msg;
    if (!require_running(p, msg))
      return {false, what + ": " + msg};
    if (p.child.paused() == pause)
      return {false, what + ": " + kind_name(p.kind) + " " + p.name + " is " +
                         (pause ? "already paused" : "not paused")};
    pid_t pid = p.child.pid();
    int sig = pause ? SIGSTOP : SIGCONT;
    ::kill(pid, sig);
    p.child.set_paused(pause); // from now on: cleanup sends SIGCONT first even if the wait below fails
    auto t0 = clock_type::now();
    while ((proc_state(pid) == 'T') != pause) {
      if (!alive(p))
        return {false, what + ": pid " + std::to_string(pid) + " is " + exited_text(p) + ": " + last_line(p.err)};
      if (since(t0) > pause_limit_s)
        return {false, what + ": pid " + std::to_string(pid) + " not " + (pause ? "stopped" : "running") +
                           " within " + std::to_string(static_cast<int>(pause_limit_s)) + " s after " +
                           (pause ? "SIGSTOP" : "SIGCONT")};
      sleep_s(0.01);
    }
    return {true, what + ": pid " + std::to_string(pid) + (pause ? " stopped (SIGSTOP)" : " continued (SIGCONT)")};
  }

  step_result run_sleep(const step& s) {
    std::string what = "sleep_ms " + std::to_string(s.sleep_ms);
    auto t0 = clock_type::now();
    double limit = static_cast<double>(s.sleep_ms) / 1000;
    while (since(t0) < limit) {
      if (g_signal)
        return {false, what + ": interrupted by " + sig_text(g_signal)};
      sleep_s(std::min(0.05, limit - since(t0)));
    }
    return {true, what};
  }

  static std::string sample_text(const std::string& name, const std::map<std::string, std::string>& labels) {
    std::string s = name;
    if (labels.empty())
      return s;
    s += "{";
    bool first = true;
    for (auto& [k, v] : labels) {
      s += (first ? "" : ",") + k + "=\"" + v + "\"";
      first = false;
    }
    return s + "}";
  }

  step_result run_metric(const step& s) {
    proc& p = *find(s.target);
    std::string what = "metric " + std::string(kind_name(p.kind)) + " " + p.name;
    std::string msg, want = sample_text(s.metric_name, s.labels);
    if (!require_running(p, msg) || !require_unpaused(p, msg))
      return {false, what + ": " + msg};
    http_response resp = request(p.http_port, "GET", "/metrics", "");
    if (resp.status != 200)
      return {false, what + ": GET /metrics: " +
                         (resp.status == 0 ? "no answer: " + resp.error : std::to_string(resp.status))};
    std::vector<prometheus_sample> found;
    if (!parse_prometheus_samples(resp.body, s.metric_name, found, msg))
      return {false, what + ": GET /metrics: " + msg};
    const prometheus_sample* hit = nullptr;
    for (auto& smp : found)
      if (smp.labels == s.labels)
        hit = &smp;
    if (!hit) {
      if (found.empty())
        return {false, what + ": " + want + " absent: /metrics has no sample named " + s.metric_name};
      std::vector<std::string> there;
      for (auto& smp : found)
        there.push_back(sample_text(s.metric_name, smp.labels) + " " + smp.value);
      return {false, what + ": " + want + " absent; " + s.metric_name + " has: " + join(there, ", ")};
    }
    char* endp = nullptr;
    double x = std::strtod(hit->value.c_str(), &endp);
    if (*endp != '\0')
      return {false, what + ": " + want + " = " + hit->value + ", not a number"};
    std::string text = what + ": " + want + " = " + hit->value;
    if (s.metric_value.is_null() || matches(json(x), s.metric_value))
      return {true, text};
    return {false, text + ", expected " + expected_text(s.metric_value)};
  }

  step_result run_step(const step& s) {
    if (s.action == "send")
      return run_send(s);
    if (s.action == "sleep_ms")
      return run_sleep(s);
    if (s.action == "metric")
      return run_metric(s);
    proc& p = *find(s.target);
    std::string what = s.action + " " + kind_name(p.kind) + " " + p.name;
    std::string msg;
    if (s.action == "start") {
      auto o = start_proc(p, false, msg);
      return {o == start_outcome::ready, what + ": " + msg};
    }
    if (s.action == "stop" || s.action == "kill") {
      if (!require_running(p, msg))
        return {false, what + ": " + msg};
      pid_t pid = p.child.pid();
      bool ok = stop_proc(p, s.action == "stop" ? SIGTERM : SIGKILL, exit_limit_s, msg);
      return {ok, what + ": pid " + std::to_string(pid) + " " + msg};
    }
    if (s.action == "restart") {
      if (!p.started_once)
        return {false, what + ": " + std::string(kind_name(p.kind)) + " " + p.name + " was never started"};
      std::string how = "was not running";
      if (alive(p)) {
        pid_t pid = p.child.pid();
        if (!stop_proc(p, SIGTERM, exit_limit_s, how))
          return {false, what + ": pid " + std::to_string(pid) + " " + how};
        how = "pid " + std::to_string(pid) + " " + how;
      }
      auto o = start_proc(p, true, msg);
      return {o == start_outcome::ready, what + ": " + how + "; " + msg};
    }
    if (s.action == "pause" || s.action == "resume")
      return pause_or_resume(p, s.action == "pause", what);
    if (s.action == "evict") {
      if (!require_running(p, msg) || !require_unpaused(p, msg))
        return {false, what + ": " + msg};
      json body = {{"tier", s.tier}};
      http_response resp = request(p.http_port, "POST", "/admin/evict", body.dump());
      std::string text = what + " " + s.tier + ": " + std::to_string(resp.status);
      if (resp.status == 0)
        return {false, text + " (" + resp.error + ")"};
      std::string b = resp.body.size() > 200 ? resp.body.substr(0, 200) + "..." : resp.body;
      while (!b.empty() && (b.back() == '\n' || b.back() == '\r'))
        b.pop_back();
      return {resp.status == 200, text + " " + b};
    }
    if (s.action == "expect_start_failure") {
      if (alive(p))
        return {false, what + ": " + kind_name(p.kind) + " " + p.name + " is already running"};
      auto o = start_proc(p, false, msg);
      if (o == start_outcome::interrupted)
        return {false, what + ": " + msg};
      if (o == start_outcome::ready) {
        std::string how;
        stop_proc(p, SIGTERM, exit_limit_s, how);
        return {false, what + ": it started (" + msg + "), expected it to fail"};
      }
      bool exited = msg.rfind("exit ", 0) == 0 || msg.rfind("killed by ", 0) == 0;
      if (!exited) // it never ran (a placeholder, a log file) or did not stop in time
        return {false, what + ": " + msg};
      if (msg.rfind("exit 0 ", 0) == 0)
        return {false, what + ": it exited 0 before its ready line, expected a failure"};
      std::string text = read_tail(p.out) + read_tail(p.err);
      if (text.find(s.contains) == std::string::npos)
        return {false, what + ": " + msg + "; its output does not contain \"" + s.contains + "\""};
      return {true, what + ": " + msg};
    }
    return {false, what + ": unknown action"};
  }

  // Stops every process still running (SIGTERM, bounded wait, SIGKILL); false if one needed SIGKILL.
  bool stop_all(std::vector<std::string>& notes) {
    bool clean = true;
    for (auto it = topo_.procs.rbegin(); it != topo_.procs.rend(); ++it) {
      proc& p = *it;
      if (p.child.pid() <= 0)
        continue;
      pid_t pid = p.child.pid();
      std::string how;
      if (!stop_proc(p, SIGTERM, g_signal ? 10 : exit_limit_s, how)) {
        clean = false;
        notes.push_back(std::string(kind_name(p.kind)) + " " + p.name + " pid " + std::to_string(pid) + ": " + how);
      }
    }
    return clean;
  }

private:
  topology topo_;
  std::string dir_;
  int launches_ = 0;
  std::map<std::string, record> records_;
  std::map<std::string, int> last_status_;
};

// What a step does, in words: "send node a", "kill store s", "evict node b hbm".
std::string describe(const step& s, runner& r) {
  proc* p = r.find(s.target);
  if (s.action == "sleep_ms")
    return "sleep_ms " + std::to_string(s.sleep_ms);
  std::string what = s.action + " " + (p ? kind_name(p->kind) + std::string(" ") : "") + s.target;
  if (s.action == "evict")
    what += " " + s.tier;
  if (s.action == "metric")
    what += " " + s.metric_name;
  return what;
}

std::string step_label(const step& s) {
  return std::to_string(s.index) + (s.name.empty() ? "" : " " + s.name);
}

void print_step(bool ok, const step& s, const std::string& text) {
  std::cout << (ok ? "ok   " : "FAIL ") << step_label(s) << (s.name.empty() ? " " : ": ") << text << std::endl;
}

} // namespace

int run_topo(const std::string& file) {
  topology topo;
  try {
    topo = parse_topology(file);
  } catch (const bad_file& e) {
    std::cerr << "ordo topo run " << file << ": " << e.what() << "\n";
    return 2;
  }

  // SIGINT / SIGTERM set a flag every wait loop checks; the processes are then stopped.
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; // no SA_RESTART: a sleeping wait ends early
  struct sigaction old_int {}, old_term {}, old_pipe {};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ign, &old_pipe);
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, SIGINT);
  sigaddset(&unblock, SIGTERM);
  ::sigprocmask(SIG_UNBLOCK, &unblock, nullptr);

  std::string base = "/tmp";
  if (const char* t = std::getenv("TMPDIR"); t && *t)
    base = t;
  std::string tmpl = base + "/ordo-topo-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) {
    std::cerr << "ordo topo run " << file << ": cannot create a directory in " << base << ": "
              << std::strerror(errno) << "\n";
    return 1;
  }
  std::string dir = buf.data();

  runner r(std::move(topo), dir);
  int passed = 0, failed = 0;
  bool setup_ok = true;
  std::string stopped_because;

  std::cout << "topology " << file << ": logs in " << dir << std::endl;
  for (auto& p : r.procs()) {
    if (!p.autostart)
      continue;
    std::string msg;
    auto o = r.start_proc(p, false, msg);
    std::string what = std::string("start ") + kind_name(p.kind) + " " + p.name;
    if (o == runner::start_outcome::ready) {
      std::cout << "     " << what << ": " << msg << std::endl;
      continue;
    }
    std::cout << "FAIL " << what << ": " << msg << std::endl;
    setup_ok = false;
    ++failed; // the failed start counts, and every step below fails unrun
    stopped_because = o == runner::start_outcome::interrupted ? msg : what + " failed";
    break;
  }

  for (auto& s : r.steps()) {
    if (!stopped_because.empty()) {
      print_step(false, s, describe(s, r) + ": not run (" + stopped_because + ")");
      ++failed;
      continue;
    }
    step_result res = r.run_step(s);
    if (g_signal && !res.ok && stopped_because.empty())
      stopped_because = std::string("interrupted by ") + sig_text(g_signal);
    print_step(res.ok, s, res.text);
    (res.ok ? passed : failed)++;
    if (g_signal && stopped_because.empty())
      stopped_because = std::string("interrupted by ") + sig_text(g_signal);
  }

  // A process that ignores SIGTERM at the end is a failure too (it was SIGKILLed).
  std::vector<std::string> notes;
  bool clean = r.stop_all(notes);
  for (auto& n : notes) {
    std::cout << "FAIL stop " << n << std::endl;
    ++failed;
  }
  int sig = g_signal;
  bool ok = setup_ok && failed == 0 && clean && sig == 0;
  if (ok) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  } else {
    std::cout << "     logs kept in " << dir << std::endl;
  }
  if (sig)
    std::cout << "     interrupted by " << sig_text(sig) << ": every process stopped" << std::endl;
  std::cout << passed << " passed, " << failed << " failed" << std::endl;

  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGPIPE, &old_pipe, nullptr);
  if (sig)
    return 128 + sig;
  return ok ? 0 : 1;
}

} // namespace ordo
