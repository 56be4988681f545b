#include "kvtune/scenario.h"

#include <map>

#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "toml_reader.h"

namespace kvtune {
namespace {

using detail::TableReader;
using detail::where;

Distribution distribution(TableReader& t) {
  const std::string d = t.choice("distribution", "normal", {"normal", "uniform", "laplace"});
  return d == "uniform" ? Distribution::uniform : d == "laplace" ? Distribution::laplace : Distribution::normal;
}

WorkloadConfig read_workload(TableReader w) {
  WorkloadConfig cfg;
  cfg.tokens = w.integer("tokens", cfg.tokens, 1, int64_t(1) << 24);
  cfg.head_dim = w.integer("head_dim", cfg.head_dim, 1, 4096);
  cfg.queries = w.integer("queries", cfg.queries, 1, 1 << 16);

  TableReader k = w.table("keys");
  cfg.keys.distribution = distribution(k);
  cfg.keys.scale = k.real("scale", 1.0, 0.0, 1e6);
  cfg.keys.outlier_channels = k.integers("outlier_channels", 0, cfg.head_dim - 1);
  cfg.keys.outlier_count = k.integer("outlier_count", 0, 0, cfg.head_dim);
  if (!cfg.keys.outlier_channels.empty() && cfg.keys.outlier_count > 0) {
    k.fail(*k.node("outlier_count"), "give either 'outlier_channels' or 'outlier_count', not both");
  }
  cfg.keys.outlier_scale = k.real("outlier_scale", 1.0, 0.0, 1e6);
  cfg.keys.channel_offset = k.real("channel_offset", 0.0, 0.0, 1e6);
  k.finish();

  TableReader v = w.table("values");
  cfg.values.distribution = distribution(v);
  cfg.values.scale = v.real("scale", 1.0, 0.0, 1e6);
  v.finish();

  TableReader q = w.table("queries_profile");
  cfg.query.distribution = distribution(q);
  cfg.query.scale = q.real("scale", 1.0, 0.0, 1e6);
  q.finish();

  if (w.has("rope")) {
    TableReader r = w.table("rope");
    cfg.rope.enabled = true;
    cfg.rope.theta = r.real("theta", cfg.rope.theta, 1.0 + 1e-9, 1e12);
    cfg.rope.convention = r.choice("convention", "rotate_half", {"rotate_half", "interleaved"}) == "interleaved"
                              ? RopeConvention::interleaved
                              : RopeConvention::rotate_half;
    if (cfg.head_dim % 2 != 0) r.fail(*w.node("rope"), "RoPE needs an even head_dim");
    r.finish();
  }

  TableReader s = w.table("sinks");
  cfg.sinks.count = s.integer("count", 0, 0, cfg.tokens - 1);
  cfg.sinks.key_norm = s.real("key_norm", cfg.sinks.key_norm, 0.0, 1e6);
  cfg.sinks.value_scale = s.real("value_scale", cfg.sinks.value_scale, 0.0, 1e6);
  cfg.sinks.mass = s.real("mass", cfg.sinks.mass, 0.0, 0.999);
  s.finish();

  TableReader n = w.table("needles");
  cfg.needles.depths = n.reals("depths", 0.0, 1.0);
  cfg.needles.mass = n.real("mass", cfg.needles.mass, 1e-6, 0.999);
  n.finish();
  w.finish();
  return cfg;
}

}  // namespace

Scenario parse_scenario(std::string_view text, const std::string& source_name) {
  const toml::table root = detail::parse_toml(text, source_name);
  Scenario sc;
  TableReader top(root, source_name, "");
  sc.name = top.string("name", source_name);
  top.string("description", "");
  sc.workload = read_workload(top.table("workload"));
  try {
    validate(sc.workload);
  } catch (const InputError& e) {
    throw InputError(source_name + ": [workload]: " + e.what());
  }

  if (const toml::node* seeds = top.node("seeds")) {
    if (seeds->is_integer()) {
      const int64_t count = top.integer("seeds", 1, 1, 1 << 20);
      const int64_t first = top.integer("seed_start", 0, 0, int64_t(1) << 62);
      sc.seeds.clear();
      for (int64_t i = 0; i < count; ++i) sc.seeds.push_back(static_cast<uint64_t>(first + i));
    } else if (seeds->is_array()) {
      sc.seeds.clear();
      for (int64_t s : top.integers("seeds", 0, int64_t(1) << 62)) sc.seeds.push_back(static_cast<uint64_t>(s));
      if (sc.seeds.empty()) top.fail(*seeds, "'seeds' must not be empty");
    } else {
      top.fail(*seeds, "'seeds' must be a count (integer) or an array of seeds");
    }
  }
  if (top.has("seed_start") && !(top.has("seeds") && root["seeds"].is_integer())) {
    top.fail(*top.node("seed_start"), "'seed_start' needs 'seeds' given as a count");
  }
  top.node("seed_start");

  TableReader metrics = top.table("metrics");
  sc.topk = metrics.integer("topk", sc.topk, 1, 1 << 20);
  metrics.finish();

  const toml::node* pairs = top.node("pairs");
  const toml::array* list = pairs ? pairs->as_array() : nullptr;
  if (pairs == nullptr) throw InputError(source_name + ": no [[pairs]]; a scenario needs at least one K/V pair");
  if (list == nullptr || list->empty()) top.fail(*pairs, "'pairs' must be an array of tables ([[pairs]]) with k and v");
  for (const toml::node& entry : *list) {
    if (!entry.is_table()) top.fail(entry, "each [[pairs]] entry must be a table with 'k' and 'v'");
    TableReader p(*entry.as_table(), source_name, "pairs");
    PairRequest req;
    for (const char* role : {"k", "v"}) {
      const toml::node* n = p.node(role);
      if (n == nullptr) p.fail(entry, std::string("[[pairs]] entry has no '") + role + "' scheme spec");
      if (!n->is_string()) p.fail(*n, std::string("'") + role + "' must be a scheme spec string");
      (role[0] == 'k' ? req.k : req.v) = *n->value<std::string>();
    }
    req.where = where(source_name, entry.source());
    req.name = p.string("name", "");
    p.finish();
    sc.pairs.push_back(std::move(req));
  }
  top.finish();
  return sc;
}

Scenario load_scenario(const std::string& path) {
  const std::vector<std::byte> bytes = read_file(path);
  return parse_scenario(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
}

EvalPlan build_plan(const std::vector<PairRequest>& pairs, const Registry& registry, int64_t topk) {
  EvalPlan plan;
  plan.topk = topk;
  std::map<std::string, size_t> k_index, v_index;
  auto intern = [&](const std::string& spec, const std::string& where, std::vector<SchemePtr>& list,
                    std::map<std::string, size_t>& index) {
    SchemePtr s;
    try {
      s = registry.make(spec);
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
    const auto [it, added] = index.emplace(s->spec(), list.size());
    if (added) list.push_back(s);
    return it->second;
  };
  for (const PairRequest& p : pairs) {
    EvalPair e;
    e.k = intern(p.k, p.where, plan.k_schemes, k_index);
    e.v = intern(p.v, p.where, plan.v_schemes, v_index);
    e.name = p.name.empty() ? plan.k_schemes[e.k]->spec() + " / " + plan.v_schemes[e.v]->spec() : p.name;
    plan.pairs.push_back(std::move(e));
  }
  return plan;
}

}  // namespace kvtune
