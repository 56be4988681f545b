// Reading a sweep file (docs/sweep-file.md) and expanding it into validated points. Everything that
// can be checked without evaluating is checked here, so a sweep never fails an hour in on a typo.
#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "kvtune/error.h"
#include "shortest_number.h"
#include "kvtune/file_io.h"
#include "kvtune/memory.h"
#include "kvtune/policy.h"
#include "kvtune/spec.h"
#include "kvtune/sweep.h"
#include "kvtune/sweep_report.h"
#include "toml_reader.h"
#include "workload_reader.h"

namespace kvtune {
namespace {


using detail::integer_of;
using detail::TableReader;
using detail::where;

// `plugins = [...]`: shared-library paths, a relative one taken from the sweep file's folder.
std::vector<std::string> plugin_paths(TableReader& top, const std::string& source_name) {
  std::vector<std::string> out;
  const toml::node* plugins = top.node("plugins");
  if (plugins == nullptr) return out;
  const toml::array* a = plugins->as_array();
  if (a == nullptr) top.fail(*plugins, "'plugins' must be an array of shared-library paths");
  std::error_code ec;
  const std::filesystem::path base =
      std::filesystem::is_regular_file(source_name, ec) ? std::filesystem::path(source_name).parent_path() : "";
  for (const toml::node& e : *a) {
    if (!e.is_string() || e.value<std::string>()->empty()) top.fail(e, "'plugins' entries must be non-empty paths");
    const std::filesystem::path p(*e.value<std::string>());
    out.push_back(std::filesystem::absolute(p.is_absolute() ? p : base / p).lexically_normal().string());
  }
  return out;
}

// Grid combinations and policy variants dropped under skip_invalid, reported in spec.notes.
struct GridInfo {
  std::string where;
  bool skip_invalid = false;
  size_t dropped = 0;
  std::vector<std::string> examples;  // the first few reasons
};

// A candidate before the policy tables are crossed with it.
struct Base {
  std::string spec;           // canonical
  std::string where;          // the entry's (or the grid's) file:line:col
  toml::source_position pos;  // sorts the candidates into file order
  GridInfo* grid = nullptr;   // the grid it came from, if any
};

// One policy key of [search.policy] / [search.k_policy] / [search.v_policy] and its values; an empty
// value is the default (the key is left out of the spec).
struct PolicyAxis {
  std::string key;
  std::vector<std::string> values;
};

// What the expansion works with besides the file: the registry, the workload's shape, the point
// limit and the progress display.
struct Shape {
  const Registry& registry;
  int64_t tokens, head_dim;
  bool rope;
  int64_t max_points;
  const ExpandProgress& progress;
  // The window a sampled sliding-window layer's cases hold when it is shorter than `tokens`, else 0:
  // a scheme must take that length too.
  int64_t window = 0;
  // A capture's cases carry their keys as cached, with RoPE off (capture_case): nothing to un-rotate.
  bool capture = false;
};

// Refuses an expansion of `count` items before it is made.
void require_within_limit(size_t count, const Shape& shape, const std::string& at, const std::string& what) {
  if (count <= static_cast<size_t>(shape.max_points)) return;
  throw InputError(at + ": " + what + " make " + std::to_string(count) + " candidates or points, more than max_points = " +
                   std::to_string(shape.max_points) + "; narrow the search or raise [search] max_points (each point "
                   "costs one evaluation; a million points take hours)");
}


// The nodes of a key given as one value or an array of values; an empty array is refused.
std::vector<const toml::node*> one_or_many(const TableReader& t, const toml::node& n, const std::string& key) {
  std::vector<const toml::node*> out;
  if (const toml::array* a = n.as_array()) {
    if (a->empty()) t.fail(n, "'" + key + "' must not be empty");
    for (const toml::node& e : *a) out.push_back(&e);
  } else {
    out.push_back(&n);
  }
  return out;
}

// An integer parameter value checked against its domain (errors at `n`).
std::string integer_value(const TableReader& t, const toml::node& n, int64_t v, const ParamDomain& d,
                          bool zero_is_default) {
  if (zero_is_default && v == 0) return "";
  if (v < d.min || v > d.max || (d.power_of_two && (v & (v - 1)) != 0)) {
    t.fail(n, "'" + d.name + "' = " + std::to_string(v) + " is not valid; expected " + d.describe() +
                  (zero_is_default ? " or 0 (none)" : ""));
  }
  return std::to_string(v);
}

// A parameter value from TOML, spelled as a spec writes it; checked against its domain here so a
// typo is an error at its own position even under skip_invalid. Flags: "" = absent, the name = set.
// With `zero_is_default` (policy tables), 0 and the domain's default mean "leave the key out" ("").
std::string param_value(const TableReader& t, const toml::node& n, const ParamDomain& d, bool zero_is_default) {
  const std::string what = "'" + d.name + "' ";
  switch (d.kind) {
    case ParamDomain::Kind::flag:
      if (!n.is_boolean()) t.fail(n, what + "is a flag: write true (set) or false (not set)");
      return *n.value<bool>() ? d.name : "";
    case ParamDomain::Kind::integer: {
      const auto v = integer_of(n);
      if (!v) t.fail(n, what + "must be an integer (" + d.describe() + ")");
      return integer_value(t, n, *v, d, zero_is_default);
    }
    case ParamDomain::Kind::choice: {
      const auto v = n.value<std::string>();
      if (!n.is_string() || std::find(d.choices.begin(), d.choices.end(), *v) == d.choices.end()) {
        t.fail(n, what + "must be one of: " + join(d.choices));
      }
      return zero_is_default && *v == d.default_value ? "" : *v;
    }
    case ParamDomain::Kind::real: {
      const auto v = n.value<double>();
      if (!(n.is_floating_point() || n.is_integer()) || !v || !std::isfinite(*v)) {
        t.fail(n, what + "must be a number");
      }
      return detail::shortest_number(*v);
    }
  }
  return {};
}

// Every value of a key: one value, an array of values, or (integer parameters) a range
// { from = A, to = B, step = S } (A, A+S, ... <= B; step defaults to 1) or
// { from = A, to = B, factor = F } (A, A*F, ... <= B), e.g. group = { from = 16, to = 128, factor = 2 }.
std::vector<std::string> param_values(const TableReader& t, const toml::node& n, const ParamDomain& d,
                                      bool zero_is_default) {
  std::vector<std::string> out;
  const toml::table* range = n.as_table();
  if (range == nullptr) {
    for (const toml::node* e : one_or_many(t, n, d.name)) out.push_back(param_value(t, *e, d, zero_is_default));
    return out;
  }
  if (d.kind != ParamDomain::Kind::integer) t.fail(n, "'" + d.name + "' is not an integer parameter: list its values");
  TableReader r(*range, t.file(), d.name);
  const int64_t from = r.required_integer("from", INT64_MIN / 4, INT64_MAX / 4);
  const int64_t to = r.required_integer("to", from, INT64_MAX / 4);
  if (r.has("step") && r.has("factor")) t.fail(n, "'" + d.name + "': give 'step' or 'factor', not both");
  const int64_t step = r.integer("step", 1, 1, INT64_MAX / 4);
  const int64_t factor = r.integer("factor", 1, 2, 1 << 20);
  r.finish();
  constexpr size_t kMaxValues = 4096;  // a range is a short list written compactly, not a sweep of its own
  for (int64_t v = from; v <= to; v = factor > 1 ? v * factor : v + step) {
    if (out.size() == kMaxValues) t.fail(n, "'" + d.name + "': the range has more than 4096 values");
    out.push_back(integer_value(t, n, v, d, zero_is_default));
    if (factor > 1 && v == 0) break;  // 0 * factor stays 0
  }
  return out;
}

// Makes a scheme; the registry's message is prefixed with `at`.
SchemePtr make_at(const Registry& registry, const std::string& spec, const std::string& at) {
  try {
    return registry.make(spec);
  } catch (const InputError& e) {
    throw InputError(at + ": " + e.what());
  }
}

// Empty when the scheme can run on the workload as one `role`, else why not.
std::string shape_problem(const Scheme& scheme, Role role, const Shape& shape) {
  std::string why = scheme.check_shape(shape.tokens, shape.head_dim);
  if (why.empty() && shape.window > 0) {
    why = scheme.check_shape(shape.window, shape.head_dim);
    if (!why.empty()) {
      why += " (the " + std::to_string(shape.window) + "-token window of the sampled sliding-window layers)";
    }
  }
  if (why.empty() && role == Role::key && (!shape.rope || shape.capture) && scheme.traits().needs_rope) {
    why = "'" + scheme.spec() + "': rope_stage=pre needs a workload with RoPE ([workload.rope] or a model)" +
          (shape.capture ? "; a capture's keys are used as cached, after RoPE" : "");
  }
  return why;
}

// ---- [search]: explicit lists and grids ----

// `lists`: the [search] skip_invalid record the entries drop into (null: an unfit entry is an error).
void read_list(TableReader& s, const std::string& key, const Shape& shape, GridInfo* lists, std::vector<Base>* k,
               std::vector<Base>* v) {
  const toml::node* n = s.node(key);
  if (n == nullptr) return;
  const toml::array* a = n->as_array();
  if (a == nullptr) s.fail(*n, "'" + key + "' must be an array of scheme specs");
  for (const toml::node& e : *a) {
    if (!e.is_string()) s.fail(e, "'" + key + "' entries must be scheme spec strings");
    const std::string at = where(s.file(), e.source());
    const Base base{make_at(shape.registry, *e.value<std::string>(), at)->spec(), at, e.source().begin, lists};
    if (k) k->push_back(base);
    if (v) v->push_back(base);
  }
}

size_t saturating_mul(size_t a, size_t b) { return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b; }

// The cartesian product of value lists, first list slowest.
std::vector<std::vector<std::string>> product(const std::vector<std::vector<std::string>>& lists) {
  std::vector<std::vector<std::string>> out{{}};
  for (const std::vector<std::string>& values : lists) {
    std::vector<std::vector<std::string>> next;
    for (const std::vector<std::string>& prefix : out) {
      for (const std::string& value : values) {
        next.push_back(prefix);
        next.back().push_back(value);
      }
    }
    out = std::move(next);
  }
  return out;
}

std::string with_items(const std::string& spec, const std::vector<std::string>& items) {
  std::string out = spec;
  for (const std::string& item : items) {
    if (item.empty()) continue;
    out += (out.find(':') == std::string::npos ? ":" : ",") + item;
  }
  return out;
}

void drop(GridInfo& grid, const std::string& why) {
  ++grid.dropped;
  if (grid.examples.size() < 3) grid.examples.push_back(why);
}

void read_grid(const toml::node& entry, const std::string& file, const Shape& shape, GridInfo& grid,
               std::vector<Base>& k, std::vector<Base>& v) {
  if (!entry.is_table()) throw InputError(where(file, entry.source()) + ": each [[search.grid]] entry must be a table");
  TableReader g(*entry.as_table(), file, "search.grid");
  grid.where = where(file, entry.source());
  bool to_k = true, to_v = true;
  if (const toml::node* roles = g.node("roles")) {
    to_k = to_v = false;
    const toml::array* a = roles->as_array();
    if (a == nullptr || a->empty()) g.fail(*roles, "'roles' must be a non-empty array of \"k\" and \"v\"");
    for (const toml::node& r : *a) {
      const auto role = r.value<std::string>();
      if (!r.is_string() || (*role != "k" && *role != "v")) g.fail(r, "'roles' entries must be \"k\" or \"v\"");
      (*role == "k" ? to_k : to_v) = true;
    }
  }
  const toml::node& fam = g.required("family", "a scheme family, e.g. \"int\"");
  const FamilyInfo* family = fam.is_string() ? shape.registry.find(*fam.value<std::string>()) : nullptr;
  if (family == nullptr) g.fail(fam, "'family' must be one of: " + join(shape.registry.names()));
  grid.skip_invalid = g.boolean("skip_invalid", false);

  // Every other key is a parameter of the family or a policy key, in declaration order.
  std::vector<const ParamDomain*> domains;
  for (const ParamDomain& d : family->params) domains.push_back(&d);
  for (const ParamDomain& d : policy_domains()) domains.push_back(&d);
  std::vector<std::vector<std::string>> axes;
  for (const ParamDomain* d : domains) {
    const toml::node* n = g.node(d->name);
    if (n == nullptr) continue;
    std::vector<std::string> values = param_values(g, *n, *d, false);
    for (std::string& value : values) {
      if (!value.empty() && d->kind != ParamDomain::Kind::flag) value = d->name + "=" + value;
    }
    axes.push_back(std::move(values));
  }
  g.finish();  // unknown keys: the message lists the family's parameters and the policy keys

  size_t combinations = 1;
  for (const std::vector<std::string>& values : axes) combinations = saturating_mul(combinations, values.size());
  require_within_limit(combinations, shape, grid.where, "[[search.grid]]'s value lists");
  for (const std::vector<std::string>& combo : product(axes)) {
    const std::string spec = with_items(family->name, combo);
    SchemePtr scheme;
    try {
      scheme = shape.registry.make(spec);
    } catch (const InputError& e) {
      if (!grid.skip_invalid) {
        throw InputError(grid.where + ": [[search.grid]] combination '" + spec + "' is refused: " + e.what() +
                         " (skip_invalid = true drops such combinations)");
      }
      drop(grid, e.what());
      continue;
    }
    const Base base{scheme->spec(), grid.where, entry.source().begin, &grid};
    if (to_k) k.push_back(base);
    if (to_v) v.push_back(base);
  }
}

// ---- policy crossing ----

std::vector<PolicyAxis> read_policy(TableReader t, const std::set<std::string>& taken) {
  std::vector<PolicyAxis> axes;
  for (const ParamDomain& d : policy_domains()) {
    const toml::node* n = t.node(d.name);
    if (n == nullptr) continue;
    if (taken.count(d.name)) t.fail(*n, "'" + d.name + "' is already crossed by [search.policy]");
    PolicyAxis axis{d.name, {}};
    axis.values = param_values(t, *n, d, true);
    axes.push_back(std::move(axis));
  }
  t.finish();
  return axes;
}

// The policy axes that apply to a base: a key the base already sets keeps its value, and a key that
// acts on keys alone (ParamDomain::keys_only: rope_stage, pair_order) only applies to K.
std::vector<const PolicyAxis*> axes_for(const Base& base, Role role, const std::vector<PolicyAxis>& axes) {
  std::set<std::string> own;
  for (const auto& [key, _] : parse_spec(base.spec).params) own.insert(key);
  const auto keys_only = [](const std::string& key) {
    const auto& domains = policy_domains();
    return std::any_of(domains.begin(), domains.end(), [&](const ParamDomain& d) { return d.name == key && d.keys_only; });
  };
  std::vector<const PolicyAxis*> used;
  for (const PolicyAxis& a : axes) {
    if (own.count(a.key) || (role != Role::key && keys_only(a.key))) continue;
    used.push_back(&a);
  }
  return used;
}

// The specs a base becomes under the policy axes. A key that needs another key's value
// (policy_key_requirement: rotation_group needs rotation=hadamard, rotation_seed rotation=random)
// only goes where that value is, from the base or the same combination.
std::vector<std::string> cross(const Base& base, const std::vector<const PolicyAxis*>& used) {
  const ParsedSpec parsed = parse_spec(base.spec);
  std::vector<std::vector<std::string>> lists;
  for (const PolicyAxis* a : used) lists.push_back(a->values);
  std::vector<std::string> out;
  for (const std::vector<std::string>& combo : product(lists)) {
    auto value_of = [&](const std::string& key) -> std::string {
      for (size_t i = 0; i < used.size(); ++i) {
        if (used[i]->key == key) return combo[i];
      }
      for (const auto& [k, v] : parsed.params) {
        if (k == key) return v.value_or("");
      }
      return "";
    };
    std::vector<std::string> items;
    for (size_t i = 0; i < used.size(); ++i) {
      if (combo[i].empty()) continue;
      if (const auto need = policy_key_requirement(used[i]->key); need && value_of(need->first) != need->second) continue;
      items.push_back(used[i]->key + "=" + combo[i]);
    }
    out.push_back(with_items(base.spec, items));
  }
  return out;
}

// The role's candidates: bases in file order, crossed with the policy, made, validated,
// deduplicated. Their count is known (and limited) before any is made.
std::vector<std::string> expand_role(std::vector<Base> bases, Role role, const std::vector<PolicyAxis>& axes,
                                     const Shape& shape, std::map<std::string, SchemePtr, std::less<>>& schemes) {
  std::stable_sort(bases.begin(), bases.end(), [](const Base& a, const Base& b) {
    return a.pos.line != b.pos.line ? a.pos.line < b.pos.line : a.pos.column < b.pos.column;
  });
  const std::string role_label = role == Role::key ? "K candidate" : "V candidate";
  std::vector<std::vector<const PolicyAxis*>> used;
  size_t total = 0;
  for (const Base& base : bases) {
    used.push_back(axes_for(base, role, axes));
    size_t n = 1;
    for (const PolicyAxis* a : used.back()) n = saturating_mul(n, a->values.size());
    total = total > SIZE_MAX - n ? SIZE_MAX : total + n;
  }
  if (!bases.empty()) require_within_limit(total, shape, bases.front().where, "the " + role_label + "s and their policy values");
  const std::string stage = role == Role::key ? "K candidates" : "V candidates";
  std::vector<std::string> out;
  std::set<std::string> seen;
  size_t done = 0;
  for (size_t b = 0; b < bases.size(); ++b) {
    const Base& base = bases[b];
    for (const std::string& spec : cross(base, used[b])) {
      if (shape.progress && ++done % 256 == 0) shape.progress(stage, done, total);
      std::string why;
      SchemePtr scheme;
      try {
        scheme = shape.registry.make(spec);
        why = role_problem(*scheme, role);
        if (why.empty()) {
          why = shape_problem(*scheme, role, shape);
          if (!why.empty())
            why = "cannot take the workload (" + std::to_string(shape.tokens) + " tokens, head_dim " +
                  std::to_string(shape.head_dim) + "): " + why;
        }
      } catch (const InputError& e) {
        why = e.what();
      }
      if (!why.empty()) {
        if (base.grid && base.grid->skip_invalid) {
          drop(*base.grid, why);
          continue;
        }
        throw InputError(base.where + ": " + role_label + " '" + spec + "': " + why);
      }
      const std::string canonical = scheme->spec();
      if (seen.insert(canonical).second) {
        out.push_back(canonical);
        schemes.emplace(canonical, scheme);
      }
    }
  }
  if (shape.progress && total > 0) shape.progress(stage, total, total);
  return out;
}

// ---- points ----

struct Constraints {
  bool k_at_least_v = false;
  std::optional<double> max_pair_bits;
  std::set<std::pair<std::string, std::string>> exclude;
  const toml::node* table = nullptr;  // for the error when constraints cannot apply
};

Constraints read_constraints(TableReader t, const Registry& registry) {
  Constraints c;
  c.k_at_least_v = t.boolean("k_bits_at_least_v_bits", false);
  if (t.node("max_pair_bits") != nullptr) c.max_pair_bits = t.real("max_pair_bits", 0.0, 0.0, 1e6);
  if (const toml::node* n = t.node("exclude")) {
    const toml::array* a = n->as_array();
    if (a == nullptr) t.fail(*n, "'exclude' must be an array of \"KSPEC/VSPEC\" strings");
    for (const toml::node& e : *a) {
      const auto text = e.value<std::string>();
      const size_t slash = text ? text->find('/') : std::string::npos;
      if (!e.is_string() || slash == std::string::npos || text->find('/', slash + 1) != std::string::npos) {
        t.fail(e, "'exclude' entries must be \"KSPEC/VSPEC\" (one '/')");
      }
      const std::string at = where(t.file(), e.source()) + ": 'exclude' entry";
      c.exclude.emplace(make_at(registry, text->substr(0, slash), at)->spec(),
                        make_at(registry, text->substr(slash + 1), at)->spec());
    }
  }
  t.finish();
  return c;
}

std::vector<SweepPoint> search_points(const SweepSpec& spec, const Constraints& c, const Shape& shape,
                                      const std::string& pairing_at, std::vector<SweepNote>& notes) {
  const auto& schemes = spec.schemes;
  std::vector<std::pair<std::string, std::string>> pairs;
  const auto& ks = spec.k_candidates;
  const auto& vs = spec.v_candidates;
  if (ks.empty() && vs.empty()) return {};
  if (spec.pairing != Pairing::matched && (ks.empty() || vs.empty())) {
    throw InputError(pairing_at + ": pairing \"" + pairing_name(spec.pairing) +
                     "\" needs K and V candidates; [search] gives " + std::to_string(ks.size()) + " K and " +
                     std::to_string(vs.size()) + " V candidates");
  }
  const size_t count = spec.pairing == Pairing::cartesian ? saturating_mul(ks.size(), vs.size())
                       : spec.pairing == Pairing::matched ? std::min(ks.size(), vs.size())
                                                          : ks.size() + vs.size();
  require_within_limit(count, shape, pairing_at,
                       "pairing \"" + std::string(pairing_name(spec.pairing)) + "\" of " + std::to_string(ks.size()) +
                           " K and " + std::to_string(vs.size()) + " V candidates would");
  switch (spec.pairing) {
    case Pairing::cartesian:
      for (const std::string& k : ks) {
        for (const std::string& v : vs) pairs.emplace_back(k, v);
      }
      break;
    case Pairing::matched:
      for (const std::string& k : ks) {
        if (std::find(vs.begin(), vs.end(), k) != vs.end()) pairs.emplace_back(k, k);
      }
      if (pairs.empty()) {
        throw InputError(pairing_at + ": pairing \"matched\" needs candidates that are both K and V candidates; the " +
                         std::to_string(ks.size()) + " K and " + std::to_string(vs.size()) +
                         " V candidates share none (list them under 'both')");
      }
      break;
    case Pairing::independent:  // phase 1: each role against the exact other role
      for (const std::string& k : ks) pairs.emplace_back(k, "none");
      for (const std::string& v : vs) pairs.emplace_back("none", v);
      break;
  }
  auto bits = [&](const std::string& s) { return schemes.at(s)->bits_per_element(shape.tokens, shape.head_dim); };
  size_t by_order = 0, by_sum = 0, by_exclude = 0;
  std::vector<SweepPoint> out;
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& [k, v] : pairs) {
    if (!seen.insert({k, v}).second) continue;
    if (c.exclude.count({k, v})) {
      ++by_exclude;
      continue;
    }
    if (c.k_at_least_v && bits(k) < bits(v)) {
      ++by_order;
      continue;
    }
    if (c.max_pair_bits && bits(k) + bits(v) > *c.max_pair_bits) {
      ++by_sum;
      continue;
    }
    out.push_back({k, v, "search", schemes.at(k), schemes.at(v)});
    if (shape.progress && out.size() % 4096 == 0) shape.progress("pairs", seen.size(), pairs.size());
  }
  if (by_order + by_sum + by_exclude > 0) {
    notes.push_back({.kind = SweepNote::Kind::constraints_dropped,
                     .dropped = by_order + by_sum + by_exclude,
                     .of = seen.size(),
                     .by_order = by_order,
                     .by_sum = by_sum,
                     .by_exclude = by_exclude});
  }
  return out;
}

// ---- [budget] and runtimes ----

// A size, or with `gpus` also "NxSIZE" (N GPUs of SIZE each, N returned there).
uint64_t size_value(const TableReader& t, const toml::node& n, const std::string& what,
                    std::optional<int64_t>* gpus = nullptr) {
  if (const auto bytes = integer_of(n); bytes && *bytes > 0)
    return static_cast<uint64_t>(*bytes);
  if (!n.is_string()) t.fail(n, "'" + what + "' must be a size such as \"80GiB\" or a byte count");
  try {
    if (gpus == nullptr) return parse_size(*n.value<std::string>(), "budget.fit." + what);
    const GpuMemory g = parse_gpu_memory(*n.value<std::string>(), "budget.fit." + what);
    *gpus = g.gpus;
    return g.bytes;
  } catch (const InputError& e) {
    t.fail(n, e.what());
  }
}

SweepBudget read_budget(TableReader b, const SweepSpec& spec) {
  SweepBudget out;
  for (const std::string_view name : kMetricNames) {  // every term is a valid key (the unknown-key message lists them)
    for (const char* bound : {"max_", "min_"}) {
      for (const char* stat : {"", "_p95"}) b.has(bound + std::string(name) + stat);
    }
  }
  // Error terms: every key of the table that names a metric's bound, in the file's order.
  std::vector<std::pair<toml::source_position, BudgetTerm>> terms;
  for (const auto& [key, node] : b.raw()) {
    std::optional<BudgetTerm> term = budget_term_for_key(key.str());
    if (!term) continue;
    const MetricInfo& info = metric_info(term->metric);
    const bool ratio = info.higher_is_better;  // agreement and needle metrics are in [0, 1]
    term->bound = b.real(std::string(key.str()), 0.0, 0.0, ratio ? 1.0 : 1e6);
    if (info.needs_needles && spec.scenario.workload.needles.depths.empty()) {
      b.fail(node, "'" + std::string(key.str()) + "' needs needles in the workload ([workload.needles] depths)");
    }
    terms.emplace_back(node.source().begin, *term);
  }
  std::stable_sort(terms.begin(), terms.end(), [](const auto& a, const auto& c) {
    return a.first.line != c.first.line ? a.first.line < c.first.line : a.first.column < c.first.column;
  });
  for (const auto& [_, term] : terms) out.terms.push_back(term);
  out.max_bits = b.node("max_bits") == nullptr ? std::nullopt : std::optional(b.real("max_bits", 0.0, 0.0, 64.0));
  if (const toml::node* fit = b.node("fit")) {
    if (!fit->is_table())
      b.fail(*fit, "'fit' must be a table { gpu_mem = \"80GiB\", weights = \"16GB\", ctx, sequences, tensor_parallel }");
    if (!spec.model) {
      b.fail(*fit, "'fit' needs [workload] model = \"NAME\" (or a capture): the cache's size depends on the model's layers "
                   "and heads");
    }
    TableReader f = b.table("fit");
    MemoryFit m;
    std::optional<int64_t> size_gpus;  // N of gpu_mem = "NxSIZE"
    const toml::node& gpu_mem = f.required("gpu_mem", "a size such as \"80GiB\" (or \"8x80GiB\" for 8 GPUs)");
    m.gpu_mem = size_value(f, gpu_mem, "gpu_mem", &size_gpus);
    const toml::node* tp = f.node("tensor_parallel");
    const std::optional<int64_t> tp_value =
        tp ? std::optional(f.integer("tensor_parallel", 1, 1, kMaxGpus)) : std::nullopt;
    try {
      m.tensor_parallel = gpu_count(size_gpus, "'gpu_mem'", tp_value, "'tensor_parallel'");
    } catch (const InputError& e) {
      f.fail(*tp, e.what());
    }
    if (const toml::node* w = f.node("weights")) {
      m.weights = size_value(f, *w, "weights");
      if (weights_per_gpu(m.weights, m.tensor_parallel) >= m.gpu_mem) {
        f.fail(*w, m.tensor_parallel == 1
                       ? "'weights' leave nothing of 'gpu_mem' for the cache"
                       : "'weights' split over " + std::to_string(m.tensor_parallel) +
                                " GPUs leave nothing of each GPU's 'gpu_mem' for the cache");
      }
    }
    m.ctx = f.integer("ctx", spec.serve_ctx > 0 ? spec.serve_ctx : spec.scenario.contexts.front(), 1, int64_t(1) << 24);
    if (spec.serve_ctx > 0 && m.ctx != spec.serve_ctx) {
      f.fail(*f.node("ctx"), "'ctx' " + std::to_string(m.ctx) + " differs from serve_ctx " +
                                 std::to_string(spec.serve_ctx) + " (give one of them)");
    }
    m.sequences = f.integer("sequences", 1, 1, int64_t(1) << 20);
    f.finish();
    out.fit = m;
  }
  if (b.node("confidence") != nullptr) out.confidence = b.real("confidence", kDefaultConfidence, 0.5, 0.999);
  const bool error_bound = !out.terms.empty();
  const std::string objective =
      b.choice("objective", error_bound ? "min_bits" : "min_error", {"min_bits", "min_error"});
  out.objective = objective == "min_bits" ? Objective::min_bits : Objective::min_error;
  b.finish();
  return out;
}

struct Target {
  RuntimeTarget target;
  std::string where;
};

std::vector<Target> read_targets(TableReader& top) {
  std::vector<Target> out;
  const toml::node* n = top.node("runtimes");
  if (n == nullptr) return out;
  const toml::array* a = n->as_array();
  if (a == nullptr) top.fail(*n, "'runtimes' must be an array of \"name@version\" strings or [[runtimes]] tables");
  for (const toml::node& e : *a) {
    Target t{{}, where(top.file(), e.source())};
    if (const auto s = e.value<std::string>(); e.is_string()) {
      const size_t at = s->find('@');
      t.target.name = s->substr(0, at);
      if (at != std::string::npos) t.target.version = s->substr(at + 1);
      if (t.target.name.empty() || t.target.version.empty()) {
        top.fail(e, "'runtimes' entries must be \"name\" or \"name@version\"");
      }
    } else if (e.is_table()) {
      TableReader r(*e.as_table(), top.file(), "runtimes");
      const toml::node& name = r.required("name", "a runtime, e.g. \"llama-cpp\"");
      t.target.name = r.string("name", "");
      t.target.version = r.string("version", "latest");
      if (t.target.name.empty() || t.target.version.empty()) r.fail(name, "'name' and 'version' must not be empty");
      r.finish();
    } else {
      top.fail(e, "'runtimes' entries must be \"name@version\" strings or tables with name and version");
    }
    for (const Target& prior : out) {
      if (prior.target.name == t.target.name && prior.target.version == t.target.version) {
        top.fail(e, "runtime '" + t.target.name + "@" + t.target.version + "' is listed twice (first at " +
                        prior.where + ")");
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

// [search] exempt_layers = [N, ...] and exempt_spec: N of the sampled layers may be exempt, so N
// must leave at least one sampled layer quantized.
// The exemption with its spec canonical (checked at exempt_spec's position).
LayerExemptionSearch with_canonical_exempt_spec(TableReader& search, const Shape& shape, LayerExemptionSearch out) {
  if (!out.any()) return out;
  try {
    out.spec = make_at(shape.registry, out.spec, "[search] exempt_spec")->spec();
  } catch (const InputError& e) {
    search.fail(*search.node("exempt_spec"), e.what());
  }
  return out;
}

LayerExemptionSearch read_exemption(TableReader& search, const Scenario& sc, const Shape& shape) {
  LayerExemptionSearch out;
  const std::string exempt_at = search.has("exempt_spec") ? where(search.file(), search.node("exempt_spec")->source()) : "";
  out.spec = search.string("exempt_spec", out.spec);
  out.sliding_window = search.boolean("exempt_sliding_window", false);
  const toml::node* n = search.node("exempt_layers");
  if (n == nullptr) {
    if (!exempt_at.empty() && !out.sliding_window) {
      throw InputError(exempt_at + ": 'exempt_spec' needs [search] exempt_layers = [N, ...] (how many layers to exempt) "
                                   "or exempt_sliding_window = true");
    }
    return with_canonical_exempt_spec(search, shape, out);
  }
  const int64_t sampled = static_cast<int64_t>(sc.layers.size());
  const toml::array* a = n->as_array();
  if (a == nullptr || a->empty()) search.fail(*n, "'exempt_layers' must be a non-empty array of layer counts, e.g. [1, 2]");
  if (sampled < 2) {
    search.fail(*n, "'exempt_layers' needs at least 2 sampled layers ([workload] layers lists " +
                        std::to_string(sampled) + "): the exempt layers are chosen among the sampled ones by their damage");
  }
  for (const toml::node& e : *a) {
    const auto v = integer_of(e);
    if (!v || *v < 1 || *v >= sampled) {
      search.fail(e, "'exempt_layers' entries must be integers in 1.." + std::to_string(sampled - 1) +
                         " (layers to exempt among the " + std::to_string(sampled) + " sampled; one must stay quantized)");
    }
    if (std::find(out.counts.begin(), out.counts.end(), *v) == out.counts.end()) out.counts.push_back(*v);
  }
  return with_canonical_exempt_spec(search, shape, out);
}

// The exemption's baseline pair (exempt_spec for K and V): the exempt layers' damage comes from it.
void add_exemption_baseline(SweepSpec& spec) {
  if (!spec.exemption.any()) return;
  const std::string& e = spec.exemption.spec;
  for (const SweepPoint& p : spec.points) {
    if (p.k == e && p.v == e) return;
  }
  const SchemePtr scheme = spec.scheme(e);
  spec.schemes.emplace(e, scheme);
  spec.points.push_back({e, e, "search: the exempt layers' dtype (exempt_layers)", scheme, scheme});
}

// Resolves each target's options and appends their pairs as points (exempt from the constraints).
// A runtime that stores the model's keys with RoPE pairs adjacent ([[key_layout]]) has its options
// judged so where the cases' pairs are the checkpoint's (i, i + D/2) (an interleaved case is in
// that order already); a capture whose pair order is unknown cannot be put in it, and its options
// say so, as they say when the scenario's profile was fitted in another order.
void add_runtime_points(SweepSpec& spec, const std::vector<Target>& targets, const SweepContext& context,
                        const Shape& shape, const Scenario& sc) {
  const bool key_order_known = !(sc.capture && !sc.capture->rope_convention_known);
  std::set<std::pair<std::string, std::string>> seen;
  for (const SweepPoint& p : spec.points) seen.insert({p.k, p.v});
  for (const Target& target : targets) {
    const RuntimeTable& table = runtime_table_named(context.runtime_tables, target.target.name, target.where);
    RuntimeView view;
    try {
      view = runtime_options(table, target.target.version);
    } catch (const InputError& e) {
      throw InputError(target.where + ": runtime '" + target.target.name + "': " + e.what());
    }
    const std::string label = target.target.name + " " + view.version;
    if (const RuntimeOption* layout = key_layout_for(view, spec.model ? spec.model->architecture : "")) {
      if (key_order_known && sc.workload.rope.convention == RopeConvention::rotate_half) {
        std::vector<std::string> more;
        const std::string& fitted = sc.profile_fitted_key_order;
        if (!fitted.empty() && fitted != layout->key_layout->pair_order) {
          more.push_back("the profile '" + sc.profile + "' was fitted with the keys in the checkpoint's order, not in " +
                         view.title + "'s: its damage here is not the one it was fitted to (the Llama profile's q4_0 "
                         "rotation gain is x4.0 in this order against the published x12.7; docs/fidelity.md)");
        }
        apply_key_layout(view, *layout, shape.registry, more);
      } else if (!key_order_known) {
        for (RuntimeOption& option : view.options) {
          option.settings.caveats.push_back(
              "kvtune judged the keys in the captured channel order: the capture's RoPE pair order is unknown, so "
              "they could not be put in the order " + view.title + " stores this model's keys (pair_order=" +
              layout->key_layout->pair_order + ", " + layout->name + ")");
        }
      }
    }
    for (const RuntimeOption& option : view.options) {
      const SchemePtr k = make_at(shape.registry, option.k_spec, label), v = make_at(shape.registry, option.v_spec, label);
      std::string why = role_problem(*k, Role::key);
      if (why.empty()) why = role_problem(*v, Role::value);
      if (why.empty()) why = shape_problem(*k, Role::key, shape);
      if (why.empty()) why = shape_problem(*v, Role::value, shape);
      if (!why.empty()) {
        spec.notes.push_back(
            {.kind = SweepNote::Kind::option_dropped, .where = label, .option = option.name, .dropped = 1, .reasons = {why}});
        continue;
      }
      spec.schemes.emplace(k->spec(), k);
      spec.schemes.emplace(v->spec(), v);
      if (seen.insert({option.k_spec, option.v_spec}).second) {
        spec.points.push_back({option.k_spec, option.v_spec, "runtime " + label + ": " + option.name,
                               spec.schemes.at(k->spec()), spec.schemes.at(v->spec())});
      }
    }
    spec.runtimes.push_back(target.target);
    spec.runtime_views.push_back(std::move(view));
  }
}

// ---- the hash ----

// A canonical text of a TOML value: tables in key order (toml++ keeps them sorted), strings
// length-prefixed, numbers in their shortest round-trip spelling. Comments, whitespace, key order
// and inline-vs-standard table syntax do not change it.
void serialize(const toml::node& n, std::string& out) {
  if (const toml::table* t = n.as_table()) {
    out += '{';
    for (const auto& [key, value] : *t) {
      out += std::to_string(key.str().size()) + ':' + std::string(key.str()) + '=';
      serialize(value, out);
      out += ';';
    }
    out += '}';
  } else if (const toml::array* a = n.as_array()) {
    out += '[';
    for (const toml::node& e : *a) {
      serialize(e, out);
      out += ',';
    }
    out += ']';
  } else if (n.is_string()) {
    const std::string s = *n.value<std::string>();
    out += '"' + std::to_string(s.size()) + ':' + s;
  } else if (n.is_integer()) {
    out += std::to_string(*integer_of(n));
  } else if (n.is_floating_point()) {
    out += 'f' + detail::shortest_number(*n.value<double>());
  } else if (n.is_boolean()) {
    out += *n.value<bool>() ? "true" : "false";
  } else {
    std::ostringstream date;  // dates and times: toml++'s own (canonical) spelling
    if (const auto* d = n.as_date()) date << d->get();
    if (const auto* tm = n.as_time()) date << tm->get();
    if (const auto* dt = n.as_date_time()) date << dt->get();
    out += 'd' + date.str();
  }
}

// FNV-1a, 64-bit (Fowler/Noll/Vo, http://www.isthe.com/chongo/tech/comp/fnv/): offset basis
// 14695981039346656037, prime 1099511628211.
uint64_t fnv1a64(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

template <typename T>
std::string list(const std::vector<T>& items) {
  std::string out;
  for (const T& x : items) out += std::to_string(x) + ',';
  return out;
}

// The statistics a model profile resolved the workload to, so a changed profile file changes the
// hash as a changed preset does.
std::string profile_statistics(const WorkloadConfig& cfg) {
  const KeyProfile& k = cfg.keys;
  std::string text = "\nprofile=" + list(k.outlier_channels) + std::to_string(k.outlier_count) + "," +
                     std::to_string(int(k.distribution)) + "," + std::to_string(int(cfg.values.distribution)) + "," +
                     std::to_string(int(cfg.query.distribution)) + "," + (k.outlier_pairs ? "pairs," : "channels,");
  for (double x : {k.scale, k.outlier_scale, k.outlier_offset, k.outlier_band_low, k.outlier_band_high,
                   k.channel_offset, cfg.values.scale, cfg.query.scale, cfg.query.outlier_scale, cfg.sinks.key_norm,
                   cfg.sinks.value_scale, cfg.sinks.mass, cfg.recency.strength, cfg.recency.tokens}) {
    text += detail::shortest_number(x) + ",";
  }
  text += std::to_string(cfg.sinks.count);
  for (const LayerOverride& o : cfg.overrides) {
    text += ";" + list(o.layers) + (o.outlier_channels ? list(*o.outlier_channels) : "-") + "," +
            (o.outlier_count ? std::to_string(*o.outlier_count) : "-") + "," +
            (o.sink_count ? std::to_string(*o.sink_count) : "-");
    for (const std::optional<double>& x :
         {o.outlier_scale, o.outlier_offset, o.channel_offset, o.sink_key_norm, o.sink_mass}) {
      text += "," + (x ? detail::shortest_number(*x) : "-");
    }
  }
  return text;
}

// What a capture's cases come from: its manifest's contents and its layer files' sizes (a capture
// written again over the same path changes the hash).
std::string capture_identity(const Capture& c) {
  std::string text = "\ncapture=" + c.model + "," + c.dtype + "," + std::to_string(c.queries_per_sample) + "," +
                     list(c.layers);
  for (const CaptureSample& s : c.samples) text += s.name + ":" + std::to_string(s.tokens) + ",";
  // The logits' scale and cap, only where the manifest gives them (older captures keep their hash).
  if (c.query_pre_attn_scalar > 0) text += "qpas=" + detail::shortest_number(c.query_pre_attn_scalar) + ",";
  if (c.logit_softcap > 0) text += "softcap=" + detail::shortest_number(c.logit_softcap) + ",";
  for (const std::string& f : c.layer_files) {
    std::error_code ec;
    text += std::to_string(std::filesystem::file_size(f, ec)) + ",";
  }
  return text;
}

// Everything that determines a point's metrics: the [workload] table as written, the shape a model
// preset resolved it to (a changed preset file changes the hash), the statistics a model profile
// resolved it to (only with a profile, so hashes without one are what they were), seeds, layers,
// heads, topk, the products' precision and the intervals' confidence level.
uint64_t spec_hash(const toml::table& root, const Scenario& sc) {
  std::string text = "kvtune sweep v1\nworkload=";
  if (const toml::node* w = root.get("workload")) serialize(*w, text);
  const WorkloadConfig& cfg = sc.workload;
  if (!sc.profile.empty()) text += profile_statistics(cfg);
  if (sc.capture) text += capture_identity(*sc.capture);
  if (sc.scales) {
    text += "\nscales=";
    for (const auto& [layer, l] : sc.scales->layers) {
      text += std::to_string(layer) + ":";
      for (double x : l.k) text += detail::shortest_number(x) + ",";
      for (double x : l.v) text += detail::shortest_number(x) + ",";
    }
  }
  text += "\nshape=" + list(std::vector<int64_t>{cfg.head_dim, cfg.layers, cfg.kv_heads, cfg.q_per_kv}) +
          (cfg.rope.enabled ? "rope," + detail::shortest_number(cfg.rope.theta) + "," +
                                  (cfg.rope.convention == RopeConvention::interleaved ? "interleaved" : "rotate_half")
                            : "norope");
  // Without RoPE the pair order still decides what pair_order=adjacent moves (an interleaved case's
  // keys stay); only the interleaved order is written, so the other hashes stay.
  if (!cfg.rope.enabled && cfg.rope.convention == RopeConvention::interleaved) text += ",pairs,interleaved";
  // A rope_scaling only where there is one, so the hashes of workloads without one stay.
  if (const RopeScaling& s = cfg.rope.scaling; cfg.rope.enabled && s.type != RopeScalingType::none) {
    text += ",scaling," + std::string(rope_scaling_name(s.type)) + "," + detail::shortest_number(s.factor) + "," +
            detail::shortest_number(s.low_freq_factor) + "," + detail::shortest_number(s.high_freq_factor) + "," +
            detail::shortest_number(s.original_max_position);
  }
  // The sliding layers' own base only where there is one (and a sliding layer to take it).
  if (cfg.rope.enabled && cfg.sliding_rope_theta > 0 && !cfg.sliding_layers.empty()) {
    text += ",sliding," + detail::shortest_number(cfg.sliding_rope_theta);
  }
  // Which layers slide and over what window, only where some do (a preset's file can change them).
  if (!cfg.sliding_layers.empty()) {
    text += "\nsliding=" + std::to_string(cfg.sliding_window) + ":" + list(cfg.sliding_layers);
  }
  // A preset's logit softcap only where there is one (a [workload] logit_softcap is in the text).
  if (cfg.logit_softcap > 0) text += "\nsoftcap=" + detail::shortest_number(cfg.logit_softcap);
  text += "\ncontexts=" + list(sc.contexts) + "\nseeds=" + list(sc.seeds) + "\nlayers=" + list(sc.layers) +
          "\nheads=" + list(sc.heads) + "\ntopk=" + std::to_string(sc.topk);
  // The level of the records' intervals (only when the file sets one, so other hashes stay).
  if (const auto level = root.at_path("budget.confidence").value<double>()) text += "\nconfidence=" + detail::shortest_number(*level);
  // float32 products give other bits (only when set, so float64 hashes stay what they were).
  if (sc.precision == Precision::float32) text += "\nprecision=float32";
  // cpu and cuda give the same bits; kernel mode's rel_out_err comes from another computation.
  if (backend_computes_attention(sc.backend)) text += "\nbackend=" + sc.backend;
  return fnv1a64(text);
}

// Replaces the file's values with the overrides' (typed TOML values, never text). True when the
// sweep differs from the text (so the text written to the output is the table, not the file).
bool apply_overrides(toml::table& root, const SweepOverrides& o) {
  auto table_at = [&](const char* key) -> toml::table& {
    if (!root.contains(key) || !root[key].is_table()) root.insert_or_assign(key, toml::table{});
    return *root[key].as_table();
  };
  bool changed = false;
  if (o.name) root.insert_or_assign("name", *o.name), changed = true;
  if (o.model) table_at("workload").insert_or_assign("model", *o.model), changed = true;
  if (o.cache) {
    // The capture replaces the synthetic workload: its shape, statistics and samples.
    toml::table& w = table_at("workload");
    for (const char* key : detail::kSyntheticWorkloadKeys) w.erase(key);
    w.insert_or_assign("source", "cache");
    w.insert_or_assign("path", *o.cache);
    w.erase("tokens");  // each sample whole unless the caller gives a prefix
    root.erase("seeds");
    root.erase("seed_start");
    changed = true;
  }
  if (o.profile) {
    // The profile replaces the file's own statistics (which would otherwise win over it).
    toml::table& w = table_at("workload");
    for (const char* key : {"keys", "values", "queries_profile", "sinks", "recency", "overrides"}) w.erase(key);
    w.insert_or_assign("profile", *o.profile);
    changed = true;
  }
  if (o.tokens) table_at("workload").insert_or_assign("tokens", *o.tokens), changed = true;
  if (o.queries) table_at("workload").insert_or_assign("queries", *o.queries), changed = true;
  if (o.confidence) {
    if (*o.confidence > 0.0) {
      table_at("budget").insert_or_assign("confidence", *o.confidence);
    } else {
      table_at("budget").erase("confidence");
    }
    changed = true;
  }
  if (o.layers) {
    toml::array layers;
    for (int64_t l : *o.layers) layers.push_back(l);
    table_at("workload").insert_or_assign("layers", std::move(layers));
    changed = true;
  }
  if (o.exempt_layers) {
    toml::table& search = table_at("search");
    search.erase("exempt_layers");
    if (!o.exempt_layers->empty()) {
      toml::array counts;
      for (int64_t n : *o.exempt_layers) counts.push_back(n);
      search.insert_or_assign("exempt_layers", std::move(counts));
    }
    changed = true;
  }
  if (o.terms) {
    toml::table& budget = table_at("budget");
    std::vector<std::string> old;
    for (const auto& [key, _] : budget) {
      if (budget_term_for_key(key.str())) old.emplace_back(key.str());
    }
    for (const std::string& key : old) budget.erase(key);
    for (const BudgetTerm& t : *o.terms) budget.insert_or_assign(t.key(), t.bound);
    changed = true;
  }
  if (o.fit) {
    table_at("budget").insert_or_assign(
        "fit", toml::table{{"gpu_mem", int64_t(o.fit->gpu_mem)}, {"weights", int64_t(o.fit->weights)},
                           {"ctx", o.fit->ctx}, {"sequences", o.fit->sequences},
                           {"tensor_parallel", o.fit->tensor_parallel}});
    changed = true;
  }
  if (o.serve_ctx) {
    root.insert_or_assign("serve_ctx", *o.serve_ctx);
    changed = true;
  }
  if (o.runtimes) {
    toml::array runtimes;
    for (const RuntimeTarget& t : *o.runtimes) runtimes.push_back(t.version == "latest" ? t.name : t.name + "@" + t.version);
    root.insert_or_assign("runtimes", std::move(runtimes));
    changed = true;
  }
  return changed;
}

}  // namespace

std::string BudgetTerm::key() const {
  return std::string(kind == BoundKind::at_most ? "max_" : "min_") + std::string(metric_name(metric)) +
         (statistic == Statistic::p95 ? "_p95" : "");
}

std::optional<BudgetTerm> budget_term_for_key(std::string_view key) {
  BudgetTerm t;
  if (key.starts_with("max_")) {
    t.kind = BoundKind::at_most;
  } else if (key.starts_with("min_")) {
    t.kind = BoundKind::at_least;
  } else {
    return std::nullopt;
  }
  key.remove_prefix(4);
  if (key.ends_with("_p95")) {
    t.statistic = Statistic::p95;
    key.remove_suffix(4);
  }
  for (const MetricInfo& info : kMetricInfo) {
    if (metric_name(info.metric) == key) {
      t.metric = info.metric;
      return t;
    }
  }
  return std::nullopt;
}

SweepPoint make_point(const Registry& registry, std::string_view k, std::string_view v, std::string origin) {
  SchemePtr ks = registry.make(k), vs = registry.make(v);
  return {ks->spec(), vs->spec(), std::move(origin), std::move(ks), std::move(vs)};
}

SchemePtr SweepSpec::scheme(std::string_view spec_text) const {
  if (const auto it = schemes.find(spec_text); it != schemes.end()) return it->second;
  if (registry == nullptr) throw std::logic_error("SweepSpec::scheme: '" + std::string(spec_text) + "' is not in the sweep");
  return registry->make(spec_text);
}

const char* pairing_name(Pairing pairing) {
  switch (pairing) {
    case Pairing::cartesian:
      return "cartesian";
    case Pairing::matched:
      return "matched";
    case Pairing::independent:
      return "independent";
  }
  return "?";
}

const char* note_kind_name(SweepNote::Kind kind) {
  switch (kind) {
    case SweepNote::Kind::grid_dropped: return "grid_dropped";
    case SweepNote::Kind::list_dropped: return "list_dropped";
    case SweepNote::Kind::constraints_dropped: return "constraints_dropped";
    case SweepNote::Kind::option_dropped: return "option_dropped";
  }
  return "?";
}

const char* objective_name(Objective objective) { return objective == Objective::min_bits ? "min_bits" : "min_error"; }


SweepSpec parse_sweep(std::string_view text, const std::string& source_name, const SweepContext& context,
                      const SweepOverrides& overrides) {
  if (context.registry == nullptr) throw std::invalid_argument("parse_sweep: the context has no registry");
  toml::table root = detail::parse_toml(text, source_name);
  const bool rewritten = apply_overrides(root, overrides);
  SweepSpec spec;
  spec.source = source_name;
  if (rewritten) {
    std::ostringstream toml_text;
    toml_text << root << "\n";
    spec.text = toml_text.str();
  } else {
    spec.text = std::string(text);
  }
  TableReader top(root, source_name, "");
  spec.name = top.string("name", std::filesystem::path(source_name).filename().string());
  top.string("description", "");
  Scenario& sc = spec.scenario;
  sc.name = spec.name;

  // The workload: the scenario reader, then the sweep's one-context rule.
  detail::read_workload(top.table("workload"), context.models, context.profiles, sc);
  if (sc.contexts.size() != 1) {
    top.fail(*root["workload"]["tokens"].node(), "a sweep evaluates one context length; 'tokens' lists " +
                                                     std::to_string(sc.contexts.size()) +
                                                     " (write one sweep file per context)");
  }
  detail::validate_workload(sc, source_name);
  detail::read_seeds(top, sc);
  detail::read_backend(top, sc);
  detail::read_metrics(top, sc);
  if (!sc.model.empty()) spec.model = context.models(sc.model);  // resolved once already: cannot fail now
  if (sc.capture) spec.model = capture_model(*sc.capture);         // the captured model's shape

  // The file's plugins join the registry before any candidate is made.
  spec.plugins = overrides.plugins ? *overrides.plugins : plugin_paths(top, source_name);
  if (overrides.plugins) top.has("plugins");
  if (spec.plugins.empty()) {
    spec.registry = std::shared_ptr<const Registry>(std::shared_ptr<const Registry>(), context.registry);
  } else if (context.with_plugins) {
    spec.registry = context.with_plugins(spec.plugins);
  } else {
    throw InputError(source_name + ": 'plugins' cannot be loaded here (this reader has no plugin loader)");
  }
  const Registry& registry = *spec.registry;

  TableReader search = top.table("search");
  const int64_t max_points = search.integer("max_points", kDefaultMaxPoints, 1, int64_t(1) << 40);
  // A capture's whole samples (context 0) are checked at its shortest selected sample.
  const int64_t tokens = sc.contexts.front() == 0 ? sc.workload.tokens : sc.contexts.front();
  const bool samples_sliding = std::any_of(sc.layers.begin(), sc.layers.end(), [&](int64_t l) {
    return attended_tokens(tokens, sc.workload.sliding_window, sc.workload.sliding_layers, l) < tokens;
  });
  const int64_t window = samples_sliding ? sc.workload.sliding_window : 0;
  const Shape shape{registry, tokens, sc.workload.head_dim, sc.workload.rope.enabled, max_points,
                    context.progress, window, sc.capture.has_value()};
  const std::string pairing = search.choice("pairing", "cartesian", {"cartesian", "matched", "independent"});
  spec.pairing = pairing == "matched"       ? Pairing::matched
                 : pairing == "independent" ? Pairing::independent
                                            : Pairing::cartesian;
  const toml::node* search_node = root.get("search");
  const std::string pairing_at = search.has("pairing") ? where(source_name, search.node("pairing")->source())
                                 : search_node         ? where(source_name, search_node->source())
                                                       : source_name;
  std::vector<Base> k_bases, v_bases;
  // skip_invalid: the k/v/both entries the workload's shape cannot take (a ggml type at head_dim
  // 16) are dropped and noted instead of refused, so one list serves many models (recommend).
  GridInfo lists{.where = pairing_at, .skip_invalid = search.boolean("skip_invalid", false)};
  GridInfo* skip = lists.skip_invalid ? &lists : nullptr;
  read_list(search, "k", shape, skip, &k_bases, nullptr);
  read_list(search, "v", shape, skip, nullptr, &v_bases);
  read_list(search, "both", shape, skip, &k_bases, &v_bases);
  std::vector<std::unique_ptr<GridInfo>> grids;
  if (const toml::node* list_node = search.node("grid")) {
    const toml::array* a = list_node->as_array();
    if (a == nullptr) search.fail(*list_node, "'grid' must be an array of tables ([[search.grid]])");
    for (const toml::node& entry : *a) {
      grids.push_back(std::make_unique<GridInfo>());
      read_grid(entry, source_name, shape, *grids.back(), k_bases, v_bases);
    }
  }
  const std::vector<PolicyAxis> both = read_policy(search.table("policy"), {});
  std::set<std::string> taken;
  for (const PolicyAxis& a : both) taken.insert(a.key);
  std::vector<PolicyAxis> k_axes = both, v_axes = both;
  for (PolicyAxis& a : read_policy(search.table("k_policy"), taken)) k_axes.push_back(std::move(a));
  for (PolicyAxis& a : read_policy(search.table("v_policy"), taken)) v_axes.push_back(std::move(a));
  spec.exemption = read_exemption(search, sc, shape);
  const Constraints constraints = read_constraints(search.table("constraints"), registry);
  if (spec.pairing == Pairing::independent && search.has("constraints")) {
    search.fail(*search.node("constraints"),
                "[search.constraints] apply to pairs; with pairing = \"independent\" each phase-1 point pairs one "
                "role with exact, so constraints cannot apply (use cartesian)");
  }
  search.finish();

  if (const toml::node* serve = top.node("serve_ctx")) {
    if (!spec.model) {
      top.fail(*serve, "'serve_ctx' needs [workload] model = \"NAME\" (or a capture): memory is counted from the "
                       "model's layers and heads");
    }
    spec.serve_ctx = top.integer("serve_ctx", 0, 1, int64_t(1) << 24);
  }
  spec.budget = read_budget(top.table("budget"), spec);
  const std::vector<Target> targets = read_targets(top);
  top.finish();

  // Expansion: candidates, search points, constraints, then runtime points.
  spec.k_candidates = expand_role(std::move(k_bases), Role::key, k_axes, shape, spec.schemes);
  spec.v_candidates = expand_role(std::move(v_bases), Role::value, v_axes, shape, spec.schemes);
  spec.schemes.emplace("none", registry.make("none"));
  if (lists.dropped > 0) {
    spec.notes.push_back(
        {.kind = SweepNote::Kind::list_dropped, .where = lists.where, .dropped = lists.dropped, .reasons = lists.examples});
  }
  for (const auto& grid : grids) {
    if (grid->dropped == 0) continue;
    spec.notes.push_back({.kind = SweepNote::Kind::grid_dropped,
                          .where = grid->where,
                          .dropped = grid->dropped,
                          .reasons = grid->examples});
  }
  if (spec.k_candidates.empty() && spec.v_candidates.empty() && targets.empty()) {
    throw InputError(source_name +
                     ": nothing to evaluate: [search] gives no K or V candidates and no runtimes are "
                     "named (give [search] k/v/both or [[search.grid]], or [[runtimes]])");
  }
  spec.points = search_points(spec, constraints, shape, pairing_at, spec.notes);
  add_runtime_points(spec, targets, context, shape, sc);
  add_exemption_baseline(spec);
  if (spec.points.empty()) {
    const bool searched = !spec.k_candidates.empty() || !spec.v_candidates.empty();
    throw InputError(source_name + ": nothing to evaluate: " +
                     (searched ? "[search.constraints] dropped every pair" : "no [search] candidates") +
                     " and no runtime option is left (" + join(note_texts(spec.notes), "; ") + ")");
  }
  spec.hash = spec_hash(root, sc);
  return spec;
}

SweepSpec load_sweep(const std::string& path, const SweepContext& context) {
  const std::vector<std::byte> bytes = read_file(path);
  return parse_sweep(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path, context);
}

}  // namespace kvtune
