#include "kvtune/runtime_table.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <system_error>

#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "kvtune/spec.h"
#include "toml_reader.h"

namespace kvtune {

namespace fs = std::filesystem;
using detail::TableReader;
using detail::integer_of;
using detail::where;

namespace {

// ---- versions ------------------------------------------------------------------------------------

// A parsed version: dotted numbers (a "build" is one number), rc >= 0 for a release candidate and
// post >= 0 for a post release.
struct Version {
  std::vector<int64_t> parts;
  int64_t rc = -1;
  int64_t post = -1;
};

bool digits(std::string_view s) {
  return !s.empty() && s.size() <= 12 && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// semver: [v]N(.N){0,3}[[-]rcN | [.-]postN] (vLLM 0.11.2, TensorRT-LLM 1.3.0rc27, Ollama's tag
// v0.30.0-rc0, SGLang's v0.5.15.post1: PEP 440 post releases, which vLLM also tags); build: bN (llama.cpp b8607).
bool parse_version(const std::string& scheme, std::string_view s, Version& out) {
  if (scheme == "build") {
    if (s.size() < 2 || s[0] != 'b' || !digits(s.substr(1))) return false;
    out.parts = {std::stoll(std::string(s.substr(1)))};
    return true;
  }
  if (!s.empty() && s[0] == 'v') s.remove_prefix(1);
  if (const size_t post = s.find("post"); post != std::string_view::npos) {
    if (!digits(s.substr(post + 4))) return false;
    out.post = std::stoll(std::string(s.substr(post + 4)));
    s = s.substr(0, post > 0 && (s[post - 1] == '.' || s[post - 1] == '-') ? post - 1 : post);
    if (s.find("rc") != std::string_view::npos) return false;  // a candidate's post release is not a thing runtimes tag
  }
  if (const size_t rc = s.find("rc"); rc != std::string_view::npos) {
    if (!digits(s.substr(rc + 2))) return false;
    out.rc = std::stoll(std::string(s.substr(rc + 2)));
    s = s.substr(0, rc > 0 && s[rc - 1] == '-' ? rc - 1 : rc);  // git tags spell it -rcN
  }
  while (true) {
    const size_t dot = s.find('.');
    const std::string_view part = s.substr(0, dot);
    if (!digits(part)) return false;
    out.parts.push_back(std::stoll(std::string(part)));
    if (dot == std::string_view::npos) break;
    s.remove_prefix(dot + 1);
  }
  return out.parts.size() <= 4;
}

std::string version_syntax(const std::string& scheme) {
  return scheme == "build" ? "a build number such as b8607"
                           : "a dotted version such as 0.11.2, 1.3.0rc27 or 0.5.15.post1 (up to four numbers, optional rcN, "
                             "-rcN or .postN)";
}

int compare(const Version& a, const Version& b) {
  for (size_t i = 0; i < std::max(a.parts.size(), b.parts.size()); ++i) {
    const int64_t x = i < a.parts.size() ? a.parts[i] : 0, y = i < b.parts.size() ? b.parts[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  // A release candidate comes before its release, a post release after it.
  const int64_t x = a.rc < 0 ? INT64_MAX : a.rc, y = b.rc < 0 ? INT64_MAX : b.rc;
  if (x != y) return x < y ? -1 : 1;
  return a.post == b.post ? 0 : (a.post < b.post ? -1 : 1);
}

// ---- reading -------------------------------------------------------------------------------------

// The table source of an entry, for errors about keys it lacks.
std::string entry_where(const std::string& file, const toml::table& t) { return where(file, t.source()); }

// Like TableReader::required, but the message carries the entry's line:column.
void require(TableReader& r, const toml::table& t, const std::string& key, const std::string& path,
             const std::string& expected) {
  if (!r.has(key)) {
    throw InputError(entry_where(r.file(), t) + ": missing key '" + key + "'" +
                     (path.empty() ? "" : " in [" + path + "]") + " (" + expected + ")");
  }
}

std::vector<std::string> strings(TableReader& r, const std::string& key) {
  std::vector<std::string> out;
  const toml::node* n = r.node(key);
  if (n == nullptr) return out;
  const toml::array* a = n->as_array();
  if (a == nullptr) r.fail(*n, "'" + key + "' must be an array of strings");
  for (const toml::node& e : *a) {
    if (!e.is_string()) r.fail(e, "'" + key + "' entries must be strings");
    out.push_back(*e.value<std::string>());
  }
  return out;
}

bool boolean(TableReader& r, const std::string& key, bool fallback) {
  const toml::node* n = r.node(key);
  if (n == nullptr) return fallback;
  if (!n->is_boolean()) r.fail(*n, "'" + key + "' must be true or false");
  return *n->value<bool>();
}

std::string version(TableReader& r, const std::string& key, const std::string& scheme) {
  const std::string v = r.string(key, "");
  Version parsed;
  if (r.has(key) && !parse_version(scheme, v, parsed)) {
    r.fail(*r.node(key), "'" + key + "' = '" + v + "' is not a version; expected " + version_syntax(scheme));
  }
  return v;
}

// A kvtune spec, validated and canonicalised by the registry; its errors gain the key's position.
std::string spec(TableReader& r, const std::string& key, const Registry& registry) {
  const std::string s = r.string(key, "");
  try {
    return registry.make(s)->spec();
  } catch (const InputError& e) {
    r.fail(*r.node(key), "'" + key + "' = '" + s + "' is not a kvtune scheme: " + e.what());
  }
}

// The tables of an array of tables ([[key]]); absent = none.
std::vector<const toml::table*> tables(TableReader& r, const std::string& key) {
  std::vector<const toml::table*> out;
  const toml::node* n = r.node(key);
  if (n == nullptr) return out;
  const toml::array* a = n->as_array();
  if (a == nullptr) r.fail(*n, "'" + key + "' must be an array of tables ([[" + key + "]])");
  for (const toml::node& e : *a) {
    if (!e.is_table()) r.fail(e, "'" + key + "' entries must be tables ([[" + key + "]])");
    out.push_back(e.as_table());
  }
  return out;
}

enum class Kind { profile, k_type, v_type, pair_rule, option, layer_exemption, tensor_parallel, context, key_layout };

const char* kind_key(Kind k) {
  switch (k) {
    case Kind::profile: return "profiles";
    case Kind::k_type: return "k_types";
    case Kind::v_type: return "v_types";
    case Kind::pair_rule: return "pair_rules";
    case Kind::option: return "options";
    case Kind::layer_exemption: return "layer_exemptions";
    case Kind::tensor_parallel: return "tensor_parallel";
    case Kind::context: return "context";
    case Kind::key_layout: return "key_layout";
  }
  return "";
}

// What an entry sets and says (RuntimeSettings), as written.
RuntimeSettings read_settings(TableReader& r) {
  RuntimeSettings s;
  s.cli = strings(r, "cli");
  s.env = strings(r, "env");
  for (size_t i = 0; i < s.env.size(); ++i) {
    if (s.env[i].find('=') == std::string::npos || s.env[i].front() == '=') {
      r.fail(*r.node("env")->as_array()->get(i), "'env' entries must be NAME=VALUE (found '" + s.env[i] + "')");
    }
  }
  s.python = r.string("python", "");
  s.build = strings(r, "build");
  s.unsupported = strings(r, "unsupported");
  s.caveats = strings(r, "caveats");
  s.needs = strings(r, "needs");
  s.needs_flash_attention = boolean(r, "needs_flash_attention", false);
  s.verified = boolean(r, "verified", true);
  return s;
}

// An entry's 'for_architectures' or 'except_architectures' (architecture_in_scope): each a non-empty
// list of distinct class names, at most one of the two.
void read_architecture_scope(TableReader& r, std::vector<std::string>& only, std::vector<std::string>& except) {
  const std::pair<const char*, std::vector<std::string>*> scopes[] = {{"for_architectures", &only},
                                                                       {"except_architectures", &except}};
  for (const auto& [key, list] : scopes) {
    std::vector<std::string>& names = *list;
    names = strings(r, key);
    const toml::node* n = r.node(key);
    if (n != nullptr && names.empty()) r.fail(*n, "'" + std::string(key) + "' must name at least one class");
    for (size_t i = 0; i < names.size(); ++i) {
      const bool blank = names[i].find_first_not_of(" \t") == std::string::npos;
      if (blank || std::find(names.begin(), names.begin() + long(i), names[i]) != names.begin() + long(i)) {
        r.fail(*n->as_array()->get(i), "'" + std::string(key) + "' entries must be distinct class names");
      }
    }
  }
  if (r.has("for_architectures") && r.has("except_architectures")) {
    r.fail(*r.node("except_architectures"), "'except_architectures' and 'for_architectures' exclude each other");
  }
}

// A [[context]] entry's cell rounding (CellAllocation), when it names any of its keys.
std::optional<CellAllocation> cell_allocation(TableReader& r) {
  const char* keys[] = {"slot_pad",         "sliding_extra",     "sliding_extra_above", "sliding_pad",
                        "sliding_full",     "pad_layer_groups",  "for_architectures",   "except_architectures"};
  if (std::none_of(std::begin(keys), std::end(keys), [&](const char* k) { return r.has(k); })) return std::nullopt;
  CellAllocation a;
  a.slot_pad = r.integer("slot_pad", 1, 1, int64_t(1) << 20);
  a.sliding_extra = r.integer("sliding_extra", 0, 0, int64_t(1) << 24);
  a.sliding_pad = r.integer("sliding_pad", 1, 1, int64_t(1) << 20);
  a.sliding_full = r.boolean("sliding_full", false);
  a.pad_layer_groups = r.boolean("pad_layer_groups", false);
  read_architecture_scope(r, a.for_architectures, a.except_architectures);
  if (a.sliding_full) {
    // A layer that keeps the whole slot keeps no window, so nothing sizes one.
    for (const char* window_key : {"sliding_extra", "sliding_extra_above", "sliding_pad"}) {
      if (const toml::node* n = r.node(window_key)) {
        r.fail(*n, "'" + std::string(window_key) + "' sizes a sliding layer's window, which 'sliding_full' leaves out");
      }
    }
    // Nor are whole layers grouped apart from the full ones (vLLM groups a manager that keeps windows).
    if (const toml::node* n = r.node("pad_layer_groups")) {
      r.fail(*n, "'pad_layer_groups' groups layers that keep a window, which 'sliding_full' leaves out");
    }
  }
  if (const toml::node* n = r.node("sliding_extra_above")) {
    const std::string expected = "'sliding_extra_above' must be an array of [tokens, extra] pairs, tokens ascending";
    const toml::array* steps = n->as_array();
    if (steps == nullptr) r.fail(*n, expected);
    for (const toml::node& step : *steps) {
      const toml::array* pair = step.as_array();
      const auto tokens = pair != nullptr && pair->size() == 2 ? integer_of(*pair->get(0)) : std::nullopt;
      const auto extra = pair != nullptr && pair->size() == 2 ? integer_of(*pair->get(1)) : std::nullopt;
      const bool ascending = a.sliding_extra_above.empty() || (tokens && *tokens > a.sliding_extra_above.back().first);
      if (!tokens || !extra || *tokens < 1 || *extra < 0 || *extra > (int64_t(1) << 24) || !ascending) {
        r.fail(step, expected);
      }
      a.sliding_extra_above.emplace_back(*tokens, *extra);
    }
  }
  return a;
}

RuntimeEntry read_entry(const toml::table& t, const std::string& file, Kind kind, const std::string& scheme,
                        const Registry& registry) {
  const std::string path = kind_key(kind);
  TableReader r(t, file, path);
  RuntimeEntry e;
  e.origin = entry_where(file, t);
  switch (kind) {
    case Kind::profile:
      require(r, t, "name", path, "the profile's name, which k_types/v_types list in 'profiles'");
      e.name = r.string("name", "");
      break;
    case Kind::k_type:
    case Kind::v_type:
      require(r, t, "value", path, "the runtime's name for the cache type, e.g. \"q8_0\"");
      require(r, t, "spec", path, "the kvtune spec that emulates it, e.g. \"q8_0:rotation=hadamard\"");
      e.name = r.string("value", "");
      (kind == Kind::k_type ? e.k_spec : e.v_spec) = spec(r, "spec", registry);
      e.profiles = strings(r, "profiles");
      break;
    case Kind::pair_rule:
      e.match_k = strings(r, "k");
      e.match_v = strings(r, "v");
      e.except = strings(r, "except");
      break;
    case Kind::option:
      require(r, t, "name", path, "a short name for the option, e.g. \"fp8, checkpoint scales\"");
      require(r, t, "k", path, "the kvtune spec for keys");
      require(r, t, "v", path, "the kvtune spec for values");
      e.name = r.string("name", "");
      e.k_spec = spec(r, "k", registry);
      e.v_spec = spec(r, "v", registry);
      break;
    case Kind::layer_exemption:
      require(r, t, "name", path, "the setting's name, e.g. \"--kv-cache-dtype-skip-layers\"");
      require(r, t, "spec", path, "the kvtune spec the exempt layers keep for K and V, e.g. \"bf16\"");
      e.name = r.string("name", "");
      e.k_spec = e.v_spec = spec(r, "spec", registry);
      e.attention_types = strings(r, "attention_types");
      for (size_t i = 0; i < e.attention_types.size(); ++i) {
        const std::string& a = e.attention_types[i];
        const auto is = [&](const char* k) { return a == k; };
        if (std::none_of(kExemptAttentionTypes.begin(), kExemptAttentionTypes.end(), is)) {
          r.fail(*r.node("attention_types")->as_array()->get(i),
                 "'attention_types' entries must be one of: sliding_window (found '" + a + "')");
        }
      }
      break;
    case Kind::tensor_parallel:
      require(r, t, "name", path, "the setting that spreads the cache over GPUs, e.g. \"--tensor-parallel-size\"");
      e.name = r.string("name", "");
      e.divides = strings(r, "divides");
      for (size_t i = 0; i < e.divides.size(); ++i) {
        const auto is = [&](const char* k) { return e.divides[i] == k; };
        if (std::none_of(kTensorParallelDivides.begin(), kTensorParallelDivides.end(), is)) {
          r.fail(*r.node("divides")->as_array()->get(i),
                 "'divides' entries must be one of: q_heads, kv_heads (found '" + e.divides[i] + "')");
        }
      }
      break;
    case Kind::context:
      require(r, t, "name", path, "the setting that sizes the cache for the sequences, e.g. \"--max-model-len\"");
      e.name = r.string("name", "");
      if (r.has("cache_share") || r.has("share_of")) {
        require(r, t, "cache_share", path, "the share of memory the runtime gives its cache by default, e.g. 0.9");
        require(r, t, "share_of", path, "what cache_share is a share of: \"gpu\" or \"free\" (after the weights)");
        e.cache_share = CacheShare{r.real("cache_share", 1.0, 0.01, 1.0),
                                   r.required_choice("share_of", {"gpu", "free"}) == "free"};
      }
      e.cells = cell_allocation(r);
      break;
    case Kind::key_layout: {
      require(r, t, "name", path, "what stores the keys in this order, e.g. \"convert_hf_to_gguf.py\"");
      require(r, t, "pair_order", path, "the order the keys are stored in (the pair_order policy key): \"adjacent\"");
      require(r, t, "caveats", path, "what the user is told beside each option it changes: where and why the runtime "
                                     "stores the keys so");
      e.name = r.string("name", "");
      KeyLayout layout{.pair_order = r.required_choice("pair_order", {"adjacent"})};
      read_architecture_scope(r, layout.for_architectures, layout.except_architectures);
      e.key_layout = std::move(layout);
      break;
    }
  }
  e.since = version(r, "since", scheme);
  e.until = version(r, "until", scheme);
  if (!e.since.empty() && !e.until.empty() && compare_runtime_versions(scheme, e.since, e.until) >= 0) {
    r.fail(*r.node("until"), "'until' (" + e.until + ") must be after 'since' (" + e.since + ")");
  }
  // A layout is how the runtime stores keys, not a setting: only its caveats reach the user.
  e.settings = kind == Kind::key_layout ? RuntimeSettings{.caveats = strings(r, "caveats"),
                                                          .verified = boolean(r, "verified", true)}
                                        : read_settings(r);
  const RuntimeSettings& s = e.settings;
  // Whether a setting's text takes a value: it holds one of the kind's placeholders.
  const auto names_one_of = [](const auto& placeholders) {
    return [&placeholders](const std::string& x) {
      return std::any_of(placeholders.begin(), placeholders.end(),
                         [&](std::string_view p) { return x.find(p) != std::string::npos; });
    };
  };
  if (kind == Kind::layer_exemption) {
    const auto names_layers = names_one_of(kLayersPlaceholders);
    if (std::none_of(s.cli.begin(), s.cli.end(), names_layers) && !names_layers(s.python)) {
      throw InputError(e.origin + ": a [[layer_exemptions]] entry needs {layers}, {layers_space} or {layers_quoted} in "
                       "'cli' or 'python', where the exempt layer indices go");
    }
  }
  if (kind == Kind::tensor_parallel || kind == Kind::context) {
    const bool gpus = kind == Kind::tensor_parallel;
    const std::vector<std::string_view> placeholders =
        gpus ? std::vector<std::string_view>{kGpusPlaceholder}
             : std::vector<std::string_view>(kContextPlaceholders.begin(), kContextPlaceholders.end());
    const auto names_value = names_one_of(placeholders);
    if (std::none_of(s.cli.begin(), s.cli.end(), names_value) &&
        std::none_of(s.env.begin(), s.env.end(), names_value) && !names_value(s.python) && s.caveats.empty()) {
      throw InputError(e.origin + (gpus ? ": a [[tensor_parallel]] entry needs {gpus} in 'cli', 'env' or 'python', "
                                          "where the GPU count goes, or 'caveats' saying how the runtime spreads the "
                                          "cache without a setting"
                                        : ": a [[context]] entry needs {ctx}, {seqs} or {tokens} in 'cli', 'env' or "
                                          "'python', where the serving shape goes, or 'caveats' saying why the "
                                          "runtime needs no setting"));
    }
  }
  if (kind == Kind::layer_exemption || kind == Kind::tensor_parallel || kind == Kind::context) {
    // Its python is keyword arguments joined into the option's own call, not a second call (two
    // LLM(...) snippets would build two engines, the second one unquantized).
    const size_t eq = s.python.find('=');
    const bool keyword = eq != std::string::npos && eq > 0 &&
                         std::all_of(s.python.begin(), s.python.begin() + static_cast<std::ptrdiff_t>(eq),
                                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!s.python.empty() && !keyword) {
      r.fail(*r.node("python"), std::string("a [[") + path + "]] python is keyword arguments for the option's call, "
                                "NAME=VALUE (found '" + s.python + "')");
    }
  }
  r.finish();
  return e;
}

RuntimeNotEmulated read_not_emulated(const toml::table& t, const std::string& file, const std::string& scheme) {
  TableReader r(t, file, "not_emulated");
  require(r, t, "setting", "not_emulated", "the runtime setting, e.g. \"--kv-cache-dtype nvfp4\"");
  require(r, t, "reason", "not_emulated", "why kvtune has no scheme for it");
  RuntimeNotEmulated n;
  n.setting = r.string("setting", "");
  n.reason = r.string("reason", "");
  n.since = version(r, "since", scheme);
  n.until = version(r, "until", scheme);
  n.origin = entry_where(file, t);
  r.finish();
  return n;
}

// Cross-references a loader can check once everything is read.
void check_references(const RuntimeTable& t) {
  auto names = [](const std::vector<RuntimeEntry>& entries) {
    std::vector<std::string> out;
    for (const RuntimeEntry& e : entries) out.push_back(e.name);
    return out;
  };
  auto known = [](const std::vector<std::string>& list, const std::string& v) {
    return std::find(list.begin(), list.end(), v) != list.end();
  };
  const std::vector<std::string> profiles = names(t.profiles), ks = names(t.k_types), vs = names(t.v_types);
  for (const std::vector<RuntimeEntry>* types : {&t.k_types, &t.v_types}) {
    for (const RuntimeEntry& e : *types) {
      for (const std::string& p : e.profiles) {
        if (!known(profiles, p)) {
          throw InputError(e.origin + ": 'profiles' names '" + p + "', which no [[profiles]] entry defines; defined: " +
                           (profiles.empty() ? std::string("(none)") : join(profiles)));
        }
      }
    }
  }
  for (const RuntimeEntry& rule : t.pair_rules) {
    for (const auto& [list, valid, key] : {std::tuple{&rule.match_k, &ks, "k"}, std::tuple{&rule.match_v, &vs, "v"}}) {
      for (const std::string& v : *list) {
        if (!known(*valid, v)) {
          throw InputError(rule.origin + ": pair rule '" + key + "' names '" + v + "', which is not a " + key +
                           "_types value; valid ones are: " + join(*valid));
        }
      }
    }
    for (const std::string& pair : rule.except) {
      const size_t slash = pair.find('/');
      if (slash == std::string::npos || !known(ks, pair.substr(0, slash)) || !known(vs, pair.substr(slash + 1))) {
        throw InputError(rule.origin + ": pair rule 'except' entry '" + pair +
                         "' must be K/V with a k_types value and a v_types value");
      }
    }
  }
  // An exemption's or a multi-GPU setting's keyword arguments go before the closing parenthesis of
  // an option's call.
  const auto has_python = [](const RuntimeEntry& e) { return !e.settings.python.empty(); };
  const bool keywords = std::any_of(t.layer_exemptions.begin(), t.layer_exemptions.end(), has_python) ||
                        std::any_of(t.tensor_parallel.begin(), t.tensor_parallel.end(), has_python) ||
                        std::any_of(t.context.begin(), t.context.end(), has_python);
  for (const std::vector<RuntimeEntry>* entries : {&t.options, &t.profiles, &t.k_types, &t.v_types, &t.pair_rules}) {
    for (const RuntimeEntry& e : *entries) {
      const std::string& py = e.settings.python;
      const size_t last = py.find_last_not_of(" \n");
      if (keywords && !py.empty() && (last == std::string::npos || py[last] != ')' || py.find('#') != std::string::npos)) {
        throw InputError(e.origin + ": 'python' must end with its call's ')', with no comment, where a "
                         "[[layer_exemptions]], [[tensor_parallel]] or [[context]] entry adds its keyword arguments "
                         "(found '" +
                         py + "')");
      }
    }
  }
}

// ---- expanding -----------------------------------------------------------------------------------

bool active(const std::string& scheme, const std::string& since, const std::string& until, const std::string* v) {
  if (v == nullptr) return until.empty();  // "latest" with no checked version: the open-ended entries
  return (since.empty() || compare_runtime_versions(scheme, *v, since) >= 0) &&
         (until.empty() || compare_runtime_versions(scheme, *v, until) < 0);
}

void append_unique(std::vector<std::string>& to, const std::vector<std::string>& from) {
  for (const std::string& s : from) {
    if (std::find(to.begin(), to.end(), s) == to.end()) to.push_back(s);
  }
}

void merge(RuntimeSettings& to, const RuntimeSettings& from) {
  append_unique(to.cli, from.cli);
  append_unique(to.env, from.env);
  if (!from.python.empty()) to.python += (to.python.empty() ? "" : "\n") + from.python;
  append_unique(to.build, from.build);
  append_unique(to.unsupported, from.unsupported);
  append_unique(to.caveats, from.caveats);
  append_unique(to.needs, from.needs);
  to.needs_flash_attention = to.needs_flash_attention || from.needs_flash_attention;
  to.verified = to.verified && from.verified;
}

// Every `key` in `text` replaced by `value` (a placeholder filled in).
void replace_all(std::string& text, std::string_view key, std::string_view value) {
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size())) {
    text.replace(at, key.size(), value);
  }
}

// {k} and {v} in an independent runtime's settings: the pair's K and V type values (a build flag
// that lists the pair, such as llama.cpp's GGML_CUDA_FA_QUANTS="q8_0-q5_0").
void fill_pair(RuntimeSettings& s, const std::string& k, const std::string& v) {
  auto fill = [&](std::string& text) {
    replace_all(text, "{k}", k);
    replace_all(text, "{v}", v);
  };
  for (std::vector<std::string>* list : {&s.cli, &s.env, &s.build}) {
    for (std::string& text : *list) fill(text);
  }
  fill(s.python);
}

bool rule_matches(const RuntimeEntry& rule, const std::string& k, const std::string& v) {
  auto in = [](const std::vector<std::string>& list, const std::string& x) {
    return list.empty() || std::find(list.begin(), list.end(), x) != list.end();
  };
  const std::string pair = k + "/" + v;
  return in(rule.match_k, k) && in(rule.match_v, v) &&
         std::find(rule.except.begin(), rule.except.end(), pair) == rule.except.end();
}

}  // namespace

int compare_runtime_versions(const std::string& scheme, const std::string& a, const std::string& b,
                             const std::string& what) {
  Version x, y;
  for (const auto& [text, parsed] : {std::pair{&a, &x}, std::pair{&b, &y}}) {
    if (!parse_version(scheme, *text, *parsed)) {
      throw InputError(what + " '" + *text + "' is not valid; expected " + version_syntax(scheme));
    }
  }
  return compare(x, y);
}

RuntimeTable parse_runtime_table(std::string_view text, const std::string& source_name, const std::string& name,
                                 const Registry& registry) {
  const toml::table root = detail::parse_toml(text, source_name);
  TableReader r(root, source_name, "");
  RuntimeTable t;
  t.name = name;
  require(r, root, "name", "", "the runtime's display name, e.g. \"llama.cpp\"");
  require(r, root, "source", "", "the runtime's repository or documentation URL");
  require(r, root, "version_scheme", "", "\"semver\" or \"build\"");
  require(r, root, "kv_independent", "", "true when K and V types are set separately");
  t.title = r.string("name", "");
  t.source = r.string("source", "");
  t.version_scheme = r.required_choice("version_scheme", {"semver", "build"});
  t.kv_independent = boolean(r, "kv_independent", false);
  t.oldest = version(r, "oldest", t.version_scheme);
  t.checked = version(r, "checked", t.version_scheme);
  if (!t.oldest.empty() && !t.checked.empty() &&
      compare_runtime_versions(t.version_scheme, t.oldest, t.checked) > 0) {
    r.fail(*r.node("checked"), "'checked' (" + t.checked + ") must not be older than 'oldest' (" + t.oldest + ")");
  }
  t.notes = strings(r, "notes");
  const std::vector<std::pair<Kind, std::vector<RuntimeEntry>*>> kinds = {{Kind::profile, &t.profiles},
                                                                           {Kind::k_type, &t.k_types},
                                                                           {Kind::v_type, &t.v_types},
                                                                           {Kind::pair_rule, &t.pair_rules},
                                                                           {Kind::option, &t.options},
                                                                           {Kind::layer_exemption, &t.layer_exemptions},
                                                                           {Kind::tensor_parallel, &t.tensor_parallel},
                                                                           {Kind::context, &t.context},
                                                                           {Kind::key_layout, &t.key_layouts}};
  for (const auto& [kind, out] : kinds) {
    const std::vector<const toml::table*> entries = tables(r, kind_key(kind));
    // Joint runtimes have one dtype for both roles: per-role types and pair rules would be fiction.
    if (!t.kv_independent && (kind == Kind::profile || kind == Kind::k_type || kind == Kind::v_type ||
                              kind == Kind::pair_rule) && !entries.empty()) {
      r.fail(*r.node(kind_key(kind)), std::string("'") + kind_key(kind) +
                                          "' needs kv_independent = true; a runtime that sets K and V "
                                          "together lists [[options]]");
    }
    for (const toml::table* e : entries) out->push_back(read_entry(*e, source_name, kind, t.version_scheme, registry));
  }
  for (const toml::table* e : tables(r, "not_emulated")) {
    t.not_emulated.push_back(read_not_emulated(*e, source_name, t.version_scheme));
  }
  if (t.kv_independent && (t.k_types.empty() || t.v_types.empty())) {
    throw InputError(entry_where(source_name, root) + ": kv_independent = true needs [[k_types]] and [[v_types]]");
  }
  if (!t.kv_independent && t.options.empty()) {
    throw InputError(entry_where(source_name, root) + ": a runtime with kv_independent = false needs [[options]]");
  }
  r.finish();
  check_references(t);
  return t;
}

RuntimeTable load_runtime_table(const fs::path& path, const Registry& registry) {
  const std::vector<std::byte> bytes = read_file(path.string());
  return parse_runtime_table(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                             path.string(), path.stem().string(), registry);
}

std::vector<RuntimeTable> load_runtime_tables(const fs::path& config_dir, const Registry& registry) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(config_dir / "runtimes", ec)) {
    if (e.path().extension() == ".toml") files.push_back(e.path());
  }
  if (ec) throw InputError("cannot list " + (config_dir / "runtimes").string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<RuntimeTable> out;
  for (const fs::path& f : files) out.push_back(load_runtime_table(f, registry));
  return out;
}

const RuntimeTable& runtime_table_named(const std::vector<RuntimeTable>& tables, const std::string& name,
                                        const std::string& where) {
  const auto table = std::find_if(tables.begin(), tables.end(), [&](const RuntimeTable& t) { return t.name == name; });
  if (table != tables.end()) return *table;
  std::vector<std::string> names;
  for (const RuntimeTable& t : tables) names.push_back(t.name);
  throw InputError(where + ": unknown runtime '" + name + "'; valid ones are: " +
                   (names.empty() ? std::string("(none: no configs/runtimes tables loaded)") : join(names)));
}

RuntimeView runtime_options(const RuntimeTable& t, std::string_view requested) {
  RuntimeView view;
  view.title = t.title;
  const std::string& scheme = t.version_scheme;
  const bool latest = requested == "latest";
  view.version = latest ? (t.checked.empty() ? "latest" : t.checked) : std::string(requested);
  const std::string* v = latest && t.checked.empty() ? nullptr : &view.version;
  if (v != nullptr) {
    const std::string what = t.title + " version";
    if (!t.oldest.empty() && compare_runtime_versions(scheme, *v, t.oldest, what) < 0) {
      throw InputError(what + " '" + *v + "' is older than this table covers (" + t.oldest + " and later); " +
                       "kvtune cannot say what it supports");
    }
    view.beyond_checked = !t.checked.empty() && compare_runtime_versions(scheme, *v, t.checked, what) > 0;
  }
  auto is_active = [&](const RuntimeEntry& e) { return active(scheme, e.since, e.until, v); };

  if (t.kv_independent) {
    // One implicit, unnamed profile when the table defines none.
    std::vector<RuntimeEntry> profiles = t.profiles;
    if (profiles.empty()) profiles.emplace_back();
    for (const RuntimeEntry& p : profiles) {
      if (!is_active(p)) continue;
      auto in_profile = [&](const RuntimeEntry& e) {
        return is_active(e) && (e.profiles.empty() ||
                                std::find(e.profiles.begin(), e.profiles.end(), p.name) != e.profiles.end());
      };
      for (const RuntimeEntry& k : t.k_types) {
        if (!in_profile(k)) continue;
        for (const RuntimeEntry& val : t.v_types) {
          if (!in_profile(val)) continue;
          RuntimeOption o;
          o.name = k.name + "/" + val.name + (p.name.empty() ? "" : " (" + p.name + ")");
          o.k_spec = k.k_spec;
          o.v_spec = val.v_spec;
          for (const RuntimeEntry* part : {&p, &k, &val}) {
            merge(o.settings, part->settings);
            if (!part->origin.empty()) o.origins.push_back(part->origin);
          }
          for (const RuntimeEntry& rule : t.pair_rules) {
            if (is_active(rule) && rule_matches(rule, k.name, val.name)) {
              merge(o.settings, rule.settings);
              o.origins.push_back(rule.origin);
            }
          }
          fill_pair(o.settings, k.name, val.name);
          view.options.push_back(std::move(o));
        }
      }
    }
  }
  for (const RuntimeEntry& e : t.options) {
    if (!is_active(e)) continue;
    view.options.push_back(RuntimeOption{e.name, e.k_spec, e.v_spec, e.settings, {e.origin}});
  }
  for (const RuntimeNotEmulated& n : t.not_emulated) {
    if (active(scheme, n.since, n.until, v)) view.not_emulated.push_back(n);
  }
  // A version's exemption, multi-GPU and sequence settings: the first active entry of each.
  const auto first_active = [&](const std::vector<RuntimeEntry>& entries) -> const RuntimeEntry* {
    const auto it = std::find_if(entries.begin(), entries.end(), is_active);
    return it == entries.end() ? nullptr : &*it;
  };
  if (const RuntimeEntry* e = first_active(t.layer_exemptions)) {
    view.layer_exemption = RuntimeOption{e->name, e->k_spec, e->v_spec, e->settings, {e->origin}, e->attention_types};
  }
  if (const RuntimeEntry* e = first_active(t.tensor_parallel)) {
    view.tensor_parallel = RuntimeOption{e->name, "", "", e->settings, {e->origin}, {}, e->divides};
  }
  if (const RuntimeEntry* e = first_active(t.context)) {
    view.context = RuntimeOption{e->name, "", "", e->settings, {e->origin}, {}, {}, e->cache_share, e->cells};
  }
  for (const RuntimeEntry& e : t.key_layouts) {
    if (is_active(e)) view.key_layouts.push_back(RuntimeOption{.name = e.name, .settings = e.settings,
                                                               .origins = {e.origin}, .key_layout = e.key_layout});
  }
  return view;
}

std::string in_key_order(const std::string& k_spec, const std::string& pair_order, const Registry& registry) {
  return registry.make(spec_with_param(k_spec, "pair_order", pair_order))->spec();
}

const CellAllocation* cells_for(const RuntimeView& view, std::string_view architecture) {
  if (!view.context || !view.context->cells || !cell_rule_applies(*view.context->cells, architecture)) return nullptr;
  return &*view.context->cells;
}

const RuntimeOption* key_layout_for(const RuntimeView& view, std::string_view architecture) {
  for (const RuntimeOption& l : view.key_layouts) {
    if (architecture_in_scope(l.key_layout->for_architectures, l.key_layout->except_architectures, architecture)) {
      return &l;
    }
  }
  return nullptr;
}

void apply_key_layout(RuntimeView& view, const RuntimeOption& layout, const Registry& registry,
                      const std::vector<std::string>& more_caveats) {
  view.key_order = layout.key_layout->pair_order;
  for (RuntimeOption& option : view.options) {
    if (registry.make(option.k_spec)->traits().channel_order_invariant) continue;  // the same values either way
    const std::string canonical = in_key_order(option.k_spec, view.key_order, registry);
    if (canonical == option.k_spec) continue;
    option.k_spec = canonical;
    for (const std::string& c : layout.settings.caveats) option.settings.caveats.push_back(c);
    for (const std::string& c : more_caveats) option.settings.caveats.push_back(c);
    option.settings.verified = option.settings.verified && layout.settings.verified;
    option.origins.insert(option.origins.end(), layout.origins.begin(), layout.origins.end());
  }
}

std::string format_layers(const std::vector<int64_t>& layers, std::string_view separator, std::string_view quote) {
  std::string out;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (i > 0) out += separator;
    out.append(quote).append(std::to_string(layers[i])).append(quote);
  }
  return out;
}

namespace {

// Joins a setting's `extra` (placeholders filled) to `out`'s. Its python is keyword arguments that go
// into the option's call, before its closing parenthesis; an option without a snippet gets none,
// since the keywords alone would configure no cache type.
void join_setting(RuntimeOption& out, RuntimeSettings extra, const std::vector<std::string>& origins) {
  const std::string keywords = std::move(extra.python);
  extra.python.clear();
  merge(out.settings, extra);
  if (const size_t close = out.settings.python.rfind(')'); !keywords.empty() && close != std::string::npos) {
    out.settings.python.insert(close, ", " + keywords);
  }
  append_unique(out.origins, origins);
}

// `option` with the exemption's settings, its placeholders filled with `lists` (in
// kLayersPlaceholders' order); `what` names the exempt layers in the option's name.
RuntimeOption with_exempt(const RuntimeOption& option, const RuntimeOption& exemption,
                          const std::array<std::string, 3>& lists, const std::string& what) {
  auto fill = [&](std::string text) {
    for (size_t p = 0; p < kLayersPlaceholders.size(); ++p) replace_all(text, kLayersPlaceholders[p], lists[p]);
    return text;
  };
  RuntimeOption out = option;
  out.name += " + " + what + " kept at " + exemption.k_spec + " (" + exemption.name + ")";
  RuntimeSettings extra = exemption.settings;
  for (std::string& c : extra.cli) c = fill(c);
  extra.python = fill(extra.python);
  join_setting(out, extra, exemption.origins);
  return out;
}

}  // namespace

RuntimeOption with_exempt_layers(const RuntimeOption& option, const RuntimeOption& exemption,
                                 const std::vector<int64_t>& layers) {
  return with_exempt(option, exemption,
                     {format_layers(layers), format_layers(layers, " "), format_layers(layers, ", ", "\"")},
                     "layers " + format_layers(layers));
}

RuntimeOption with_exempt_attention_type(const RuntimeOption& option, const RuntimeOption& exemption,
                                         const std::string& attention_type) {
  if (std::find(exemption.attention_types.begin(), exemption.attention_types.end(), attention_type) ==
      exemption.attention_types.end()) {
    throw std::logic_error("with_exempt_attention_type: the exemption does not take '" + attention_type + "'");
  }
  return with_exempt(option, exemption, {attention_type, attention_type, "\"" + attention_type + "\""},
                     attention_type + " layers");
}

std::vector<std::string> broken_gpu_divisions(const std::vector<std::string>& divides, int64_t q_heads,
                                              int64_t kv_heads, int64_t gpus) {
  std::vector<std::string> broken;
  for (const std::string& d : divides) {
    if (gpus < 1 || (d == "q_heads" ? q_heads : kv_heads) < 1) continue;  // a count not known: nothing to judge
    const bool fits = d == "q_heads" ? q_heads % gpus == 0 : kv_heads % gpus == 0 || gpus % kv_heads == 0;
    if (!fits) broken.push_back(d);
  }
  return broken;
}

namespace {

// `option` with `setting` joined, each (placeholder, value) of `values` filled in first.
RuntimeOption with_filled_setting(const RuntimeOption& option, const RuntimeOption& setting,
                                  const std::vector<std::pair<std::string_view, std::string>>& values) {
  RuntimeSettings extra = setting.settings;
  const auto fill = [&](std::string& text) {
    for (const auto& [key, value] : values) replace_all(text, key, value);
  };
  for (std::vector<std::string>* list : {&extra.cli, &extra.env, &extra.caveats, &extra.unsupported}) {
    for (std::string& text : *list) fill(text);
  }
  fill(extra.python);
  RuntimeOption out = option;
  join_setting(out, std::move(extra), setting.origins);
  return out;
}

}  // namespace

RuntimeOption with_tensor_parallel(const RuntimeOption& option, const RuntimeOption& setting, int64_t gpus) {
  return with_filled_setting(option, setting, {{kGpusPlaceholder, std::to_string(gpus)}});
}

RuntimeOption with_context(const RuntimeOption& option, const RuntimeOption& setting, int64_t context,
                           int64_t sequences) {
  return with_filled_setting(option, setting,
                             {{kContextPlaceholders[0], std::to_string(context)},
                              {kContextPlaceholders[1], std::to_string(sequences)},
                              {kContextPlaceholders[2], std::to_string(context * sequences)}});
}

}  // namespace kvtune
