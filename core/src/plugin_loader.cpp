#include "kvtune/plugin_loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>

#include "kvtune/error.h"
#include "kvtune/isolation.h"
#include "kvtune/plugin_abi.h"
#include "kvtune/policy.h"
#include "plugin_guard.h"

namespace kvtune {
namespace fs = std::filesystem;
namespace {

// The smallest tables this host accepts: their ABI 1.0 sizes. When a minor appends fields these
// stay at their 1.0 values and the new fields are read only where KVTUNE_ABI_HAS says so.
constexpr size_t kDescriptionSize10 = sizeof(kvtune_plugin_description);
constexpr size_t kFamilySize10 = sizeof(kvtune_family);
constexpr size_t kDomainSize10 = sizeof(kvtune_param_domain);
constexpr size_t kSchemeSize10 = offsetof(kvtune_scheme, traits);  // 1.1 appended traits
constexpr size_t kVtableSize10 = sizeof(kvtune_scheme_vtable);

// The most packed bytes a plugin's footprint may claim: per element, and once per block.
constexpr uint64_t kMaxBytesPerElement = 64;
constexpr uint64_t kMaxFixedBytes = uint64_t{1} << 20;

std::string abi_version(uint32_t major, uint32_t minor) { return std::to_string(major) + "." + std::to_string(minor); }

// A message buffer handed to the plugin; always NUL-terminated when read back.
struct ErrorBuffer {
  static constexpr size_t kSize = 1024;
  char text[kSize] = {};
  std::string message(int32_t status) {
    text[kSize - 1] = '\0';
    if (text[0] != '\0') return text;
    return "failed with status " + std::to_string(status) + " and no message";
  }
};

// Where a plugin family's failures come from, for messages.
struct FamilyBinding {
  std::string path;
  std::string family;
  const kvtune_family* table = nullptr;
  std::string origin;  // "--plugin", "KVTUNE_PLUGIN_PATH", ...; may be empty
  // plugin_guard's name for the family, kept for the process's life (plugin_guard::keep).
  const std::string& guard_label = plugin_guard::keep("plugin family '" + family + "' (from " + from() + ")");

  std::string where() const { return "plugin " + path + ", family '" + family + "'"; }
  // "--plugin /x/libnf4.so": the plugin and where it was named.
  std::string from() const { return origin.empty() ? path : origin + " " + path; }
  [[noreturn]] void fail(int32_t status, ErrorBuffer& error) const {
    throw InputError(where() + ": " + error.message(status));
  }
};

// A kvtune::Scheme over a plugin's C vtable. Owns the handle.
class PluginScheme final : public Scheme {
 public:
  PluginScheme(std::shared_ptr<const FamilyBinding> binding, kvtune_scheme* handle)
      : binding_(std::move(binding)), handle_(handle) {
    const std::string where = binding_->where();
    if (handle_ == nullptr) throw InputError(where + ": create returned OK but no scheme (a null handle)");
    // A handle we cannot trust is leaked rather than destroyed through a bad pointer.
    if (handle_->struct_size < kSchemeSize10 || handle_->vtable == nullptr) {
      handle_ = nullptr;
      throw InputError(where + ": malformed scheme handle (struct_size below " + std::to_string(kSchemeSize10) +
                       " or no vtable)");
    }
    vt_ = handle_->vtable;
    if (vt_->struct_size < kVtableSize10 || vt_->destroy == nullptr) {
      handle_ = nullptr;
      throw InputError(where + ": malformed scheme vtable (struct_size " + std::to_string(vt_->struct_size) +
                       ", ABI 1.0 needs " + std::to_string(kVtableSize10) + ", and destroy is required)");
    }
    auto refuse = [&](const std::string& why) {
      destroy();
      handle_ = nullptr;
      throw InputError(where + ": " + why);
    };
    if (vt_->spec == nullptr || vt_->footprint == nullptr || vt_->quantize == nullptr || vt_->dequantize == nullptr) {
      refuse("malformed scheme vtable (spec, footprint, quantize and dequantize are required)");
    }
    const char* spec = nullptr;
    {
      const plugin_guard::PluginCall call(binding_->guard_label, "spec");
      spec = vt_->spec(handle_);
    }
    if (spec == nullptr || *spec == '\0') refuse("the scheme returned no spec");
    spec_ = spec;
    // The spec is how kvtune names the scheme everywhere (results, sweeps, the registry): one that
    // names another family would be evaluated as that family's scheme.
    const std::string named = spec_.substr(0, spec_.find(':'));
    if (named != binding_->family) {
      refuse("the scheme's spec '" + spec_ + "' names family '" + named + "', not its own: a spec starts with " +
             binding_->family);
    }
    if (spec_.find_first_of("/ \t\n") != std::string::npos) {
      refuse("the scheme's spec '" + spec_ + "' holds a '/' or white space, which separate specs in pairs and lists");
    }
    if (KVTUNE_ABI_HAS(handle_, kvtune_scheme, traits)) traits_ = handle_->traits;
  }
  ~PluginScheme() override {
    if (handle_ != nullptr) destroy();
  }
  PluginScheme(const PluginScheme&) = delete;
  PluginScheme& operator=(const PluginScheme&) = delete;

  std::string spec() const override { return spec_; }
  std::string family() const override { return binding_->family; }
  SchemeTraits traits() const override {
    SchemeTraits t = Scheme::traits();
    t.rotates_rows = (traits_ & KVTUNE_TRAIT_ROTATES_ROWS) != 0;
    // Declared for the checks and sweeps; with no logits callback in the ABI its keys are still
    // scored through dequantize (estimates_logits() stays false).
    t.estimates_logits = (traits_ & KVTUNE_TRAIT_ESTIMATES_LOGITS) != 0;
    t.needs_positions = (traits_ & KVTUNE_TRAIT_NEEDS_POSITIONS) != 0;
    t.needs_rope = (traits_ & KVTUNE_TRAIT_NEEDS_ROPE) != 0;
    t.static_scales = (traits_ & KVTUNE_TRAIT_STATIC_SCALES) != 0;
    t.from_plugin = true;
    t.plugin_origin = binding_->from();
    return t;
  }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string base = Scheme::check_shape(tokens, head_dim);
    if (!base.empty() || vt_->check_shape == nullptr) return base;
    ErrorBuffer error;
    const plugin_guard::PluginCall call(binding_->guard_label, "check_shape");
    const int32_t status = vt_->check_shape(handle_, tokens, head_dim, error.text, ErrorBuffer::kSize);
    if (status == KVTUNE_STATUS_OK) return {};
    if (status == KVTUNE_STATUS_INVALID_INPUT) return error.message(status);
    binding_->fail(status, error);
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    ErrorBuffer error;
    uint64_t bytes = 0;
    int32_t status = 0;
    {
      const plugin_guard::PluginCall call(binding_->guard_label, "footprint");
      status = vt_->footprint(handle_, tokens, head_dim, &bytes, error.text, ErrorBuffer::kSize);
    }
    if (status != KVTUNE_STATUS_OK) binding_->fail(status, error);
    // No storage format needs more than 64 bytes per element (float32 is 4): beyond that the number is
    // a fault that would otherwise surface as a failed allocation far from its cause.
    const uint64_t elements = static_cast<uint64_t>(std::max<int64_t>(tokens, 0)) *
                              static_cast<uint64_t>(std::max<int64_t>(head_dim, 0));
    if (bytes > elements * kMaxBytesPerElement + kMaxFixedBytes) {
      throw InputError(binding_->where() + ": footprint says " + std::to_string(bytes) + " bytes for a [" +
                       std::to_string(tokens) + ", " + std::to_string(head_dim) + "] block, more than " +
                       std::to_string(kMaxBytesPerElement) + " bytes per element: a fault in the plugin");
    }
    return static_cast<size_t>(bytes);
  }

  std::vector<std::byte> quantize(ConstMatrixView block, const QuantContext& ctx) const override {
    require_shape(block.rows, block.cols);
    std::vector<std::byte> packed(footprint(block.rows, block.cols));
    const kvtune_quant_context c = context_of(ctx);
    ErrorBuffer error;
    size_t written = 0;
    int32_t status = 0;
    {
      const plugin_guard::PluginCall call(binding_->guard_label, "quantize");
      status = vt_->quantize(handle_, block.data, block.rows, block.cols, &c, reinterpret_cast<uint8_t*>(packed.data()),
                             packed.size(), &written, error.text, ErrorBuffer::kSize);
    }
    if (status != KVTUNE_STATUS_OK) binding_->fail(status, error);
    if (written > packed.size()) {
      throw InputError(binding_->where() + ": quantize reported " + std::to_string(written) + " bytes written into a " +
                       std::to_string(packed.size()) + "-byte buffer");
    }
    packed.resize(written);
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext& ctx, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    const kvtune_quant_context c = context_of(ctx);
    ErrorBuffer error;
    int32_t status = 0;
    {
      const plugin_guard::PluginCall call(binding_->guard_label, "dequantize");
      status = vt_->dequantize(handle_, reinterpret_cast<const uint8_t*>(packed.data()), packed.size(), &c,
                               out.data, out.rows, out.cols, error.text, ErrorBuffer::kSize);
    }
    if (status != KVTUNE_STATUS_OK) binding_->fail(status, error);
    // The packed bytes are the plugin's own format: a non-finite value out of them is its fault.
    require_finite_output("dequantize", out, "");
  }

  void roundtrip(ConstMatrixView block, const QuantContext& ctx, MatrixView out) const override {
    if (vt_->roundtrip == nullptr) {
      Scheme::roundtrip(block, ctx, out);  // dequantize checks its output
      return;
    }
    require_shape(block.rows, block.cols);
    const kvtune_quant_context c = context_of(ctx);
    ErrorBuffer error;
    int32_t status = 0;
    {
      const plugin_guard::PluginCall call(binding_->guard_label, "roundtrip");
      status = vt_->roundtrip(handle_, block.data, block.rows, block.cols, &c, out.data, error.text, ErrorBuffer::kSize);
    }
    if (status != KVTUNE_STATUS_OK) binding_->fail(status, error);
    if (std::all_of(block.data, block.data + block.size(), [](float x) { return std::isfinite(x); })) {
      require_finite_output("roundtrip", out, " of a finite block");
    }
  }

  std::shared_ptr<const Scheme> calibrate(ConstMatrixView sample, const QuantContext& ctx) const override {
    if (vt_->calibrate == nullptr) return shared_from_this();
    const kvtune_quant_context c = context_of(ctx);
    ErrorBuffer error;
    kvtune_scheme* fitted = nullptr;
    const plugin_guard::PluginCall call(binding_->guard_label, "calibrate");
    const int32_t status = vt_->calibrate(handle_, sample.data, sample.rows, sample.cols, &c, &fitted, error.text,
                                          ErrorBuffer::kSize);
    if (status != KVTUNE_STATUS_OK) binding_->fail(status, error);
    if (fitted == nullptr) return shared_from_this();
    return std::make_shared<PluginScheme>(binding_, fitted);
  }

 private:
  // NaN or infinity from the plugin is a bug in it: say so, naming it, rather than let the
  // evaluator call it "the input exceeds the scheme's range".
  void require_finite_output(const char* call, ConstMatrixView out, const char* of_what) const {
    for (int64_t i = 0; i < out.size(); ++i) {
      if (std::isfinite(out.data[i])) continue;
      throw InputError("plugin scheme '" + spec_ + "' (from " + binding_->from() + "): " + call + " returned " +
                       (std::isnan(out.data[i]) ? "NaN" : "an infinity") + " at [" + std::to_string(i / out.cols) +
                       ", " + std::to_string(i % out.cols) + "]" + of_what +
                       ": a fault in the plugin, not in the input");
    }
  }

  void destroy() {
    const plugin_guard::PluginCall call(binding_->guard_label, "destroy");
    vt_->destroy(handle_);
  }

  static kvtune_quant_context context_of(const QuantContext& ctx) {
    kvtune_quant_context c{};
    c.struct_size = sizeof(kvtune_quant_context);
    c.role = ctx.role == Role::value ? KVTUNE_ROLE_VALUE : KVTUNE_ROLE_KEY;
    c.positions = ctx.positions.empty() ? nullptr : ctx.positions.data();
    c.position_count = ctx.positions.size();
    c.seed = ctx.seed;
    return c;
  }

  std::shared_ptr<const FamilyBinding> binding_;
  kvtune_scheme* handle_ = nullptr;
  const kvtune_scheme_vtable* vt_ = nullptr;
  std::string spec_;
  uint32_t traits_ = 0;  // KVTUNE_TRAIT_* bits; none for an ABI 1.0 handle
};

bool valid_family_name(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  for (const char* c = name; *c != '\0'; ++c) {
    const unsigned char u = static_cast<unsigned char>(*c);
    if (!std::isalnum(u) && u != '_' && u != '-' && u != '.') return false;
  }
  return true;
}

std::vector<std::string> string_array(const char* const* items, size_t count, const std::string& what) {
  if (count > 0 && items == nullptr) throw InputError(what + " has a count but no array");
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    if (items[i] == nullptr) throw InputError(what + " has a null entry");
    out.emplace_back(items[i]);
  }
  return out;
}

ParamDomain domain_of(const kvtune_param_domain* d, const std::string& where) {
  if (d == nullptr) throw InputError(where + ": null parameter domain");
  if (d->struct_size < kDomainSize10) {
    throw InputError(where + ": parameter domain struct_size " + std::to_string(d->struct_size) + " is below ABI 1.0's " +
                     std::to_string(kDomainSize10));
  }
  if (d->name == nullptr || *d->name == '\0') throw InputError(where + ": a parameter has no name");
  ParamDomain p;
  p.name = d->name;
  const std::string param = where + ", parameter '" + p.name + "'";
  switch (d->kind) {
    case KVTUNE_PARAM_INTEGER:
      p.kind = ParamDomain::Kind::integer;
      if (d->min > d->max) throw InputError(param + ": min " + std::to_string(d->min) + " > max " + std::to_string(d->max));
      break;
    case KVTUNE_PARAM_CHOICE:
      p.kind = ParamDomain::Kind::choice;
      if (d->choice_count == 0) throw InputError(param + ": a choice needs at least one value");
      break;
    case KVTUNE_PARAM_FLAG:
      p.kind = ParamDomain::Kind::flag;
      break;
    case KVTUNE_PARAM_REAL:
      p.kind = ParamDomain::Kind::real;
      break;
    default:
      throw InputError(param + ": unknown kind " + std::to_string(d->kind));
  }
  p.help = d->help != nullptr ? d->help : "";
  p.default_value = d->default_value != nullptr ? d->default_value : "";
  p.min = d->min;
  p.max = d->max;
  p.choices = string_array(d->choices, d->choice_count, param + " choices");
  p.examples = string_array(d->examples, d->example_count, param + " examples");
  p.in_canonical = d->in_canonical != 0;
  p.power_of_two = d->power_of_two != 0;
  return p;
}

FamilyInfo family_of(const kvtune_family* f, const std::string& path, size_t index, const std::string& origin) {
  const std::string where = "plugin " + path + ", family #" + std::to_string(index);
  if (f == nullptr) throw InputError(where + ": null family table");
  if (f->struct_size < kFamilySize10) {
    throw InputError(where + ": family struct_size " + std::to_string(f->struct_size) + " is below ABI 1.0's " +
                     std::to_string(kFamilySize10));
  }
  if (!valid_family_name(f->name)) {
    throw InputError(where + ": family name '" + std::string(f->name ? f->name : "") +
                     "' is not a word of letters, digits, '_', '-' and '.'");
  }
  auto binding = std::make_shared<FamilyBinding>(FamilyBinding{path, f->name, f, origin});
  if (f->create == nullptr) throw InputError(binding->where() + ": no create function");
  if (f->param_count > 0 && f->params == nullptr) throw InputError(binding->where() + ": parameters counted but missing");

  FamilyInfo info;
  info.name = f->name;
  info.summary = f->summary != nullptr ? f->summary : "";
  info.origin = path;
  std::set<std::string> names;
  for (size_t i = 0; i < f->param_count; ++i) {
    ParamDomain d = domain_of(f->params[i], binding->where());
    const auto& policy = policy_domains();
    if (std::any_of(policy.begin(), policy.end(), [&](const ParamDomain& p) { return p.name == d.name; })) {
      throw InputError(binding->where() + ": parameter '" + d.name + "' is a reserved policy key");
    }
    if (!names.insert(d.name).second) throw InputError(binding->where() + ": parameter '" + d.name + "' is declared twice");
    info.params.push_back(std::move(d));
  }
  info.make = [binding](const SchemeParams& params) -> SchemePtr {
    std::vector<const char*> keys, values;
    for (const auto& [key, value] : params.values()) {
      keys.push_back(key.c_str());
      values.push_back(value.c_str());
    }
    ErrorBuffer error;
    kvtune_scheme* handle = nullptr;
    const plugin_guard::PluginCall call(binding->guard_label, "create");
    const int32_t status =
        binding->table->create(binding->table, keys.data(), values.data(), keys.size(), &handle, error.text,
                               ErrorBuffer::kSize);
    if (status != KVTUNE_STATUS_OK) binding->fail(status, error);
    return std::make_shared<PluginScheme>(binding, handle);
  };
  return info;
}

PluginInfo load_plugin_unnamed(Registry& registry, const std::string& path, const std::string& origin) {
  std::error_code ec;
  if (path.empty()) throw InputError("plugin path is empty");
  if (!fs::exists(path, ec)) throw InputError("plugin '" + path + "': no such file");
  if (fs::is_directory(path, ec)) throw InputError("plugin '" + path + "' is a directory, not a shared library");
  const std::string absolute = fs::absolute(path, ec).lexically_normal().string();

  plugin_guard::arm();
  const std::string label = "plugin '" + path + "'" + (origin.empty() ? "" : " (from " + origin + ")");
  dlerror();
  void* library = nullptr;
  {
    // RTLD_LOCAL: a plugin's symbols (its copy of any inline kvtune code included) stay its own.
    const plugin_guard::PluginCall call(label, "dlopen (its static constructors)");
    library = dlopen(absolute.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (library == nullptr) {
    const char* why = dlerror();
    throw InputError("plugin '" + path + "' is not a loadable shared library: " + (why ? why : "dlopen failed"));
  }
  // Plugins are never unloaded: schemes, their handles and the description point into the library.
  dlerror();
  void* symbol = dlsym(library, KVTUNE_PLUGIN_ENTRY_POINT);
  if (symbol == nullptr) {
    throw InputError("plugin '" + path + "' has no entry point '" KVTUNE_PLUGIN_ENTRY_POINT
                     "': it is not a kvtune plugin (define one with KVTUNE_PLUGIN(...) from kvtune/plugin_sdk.h)");
  }
  const auto describe = reinterpret_cast<kvtune_plugin_describe_fn>(symbol);

  ErrorBuffer error;
  const kvtune_plugin_description* d = nullptr;
  const plugin_guard::PluginCall call(label, "describe");
  const int32_t status =
      describe(KVTUNE_PLUGIN_ABI_MAJOR, KVTUNE_PLUGIN_ABI_MINOR, &d, error.text, ErrorBuffer::kSize);
  if (status != KVTUNE_STATUS_OK) {
    throw InputError("plugin '" + path + "' failed to describe itself: " + error.message(status));
  }
  if (d == nullptr) throw InputError("plugin '" + path + "' returned no description");
  if (d->struct_size < offsetof(kvtune_plugin_description, abi_minor) + sizeof(d->abi_minor)) {
    throw InputError("plugin '" + path + "': malformed description (struct_size " + std::to_string(d->struct_size) +
                     " cannot even hold the ABI version)");
  }
  if (d->abi_major != KVTUNE_PLUGIN_ABI_MAJOR) {
    throw InputError("plugin '" + path + "' was built for kvtune plugin ABI " + abi_version(d->abi_major, d->abi_minor) +
                     ", but this kvtune speaks ABI " + abi_version(KVTUNE_PLUGIN_ABI_MAJOR, 0) + " to " +
                     abi_version(KVTUNE_PLUGIN_ABI_MAJOR, KVTUNE_PLUGIN_ABI_MINOR) +
                     "; the major versions must match: rebuild the plugin against this kvtune");
  }
  if (d->struct_size < kDescriptionSize10) {
    throw InputError("plugin '" + path + "': malformed description (struct_size " + std::to_string(d->struct_size) +
                     " is below ABI 1.0's " + std::to_string(kDescriptionSize10) + ")");
  }
  if (d->name == nullptr || *d->name == '\0') throw InputError("plugin '" + path + "': the description has no name");
  if (d->family_count == 0 || d->families == nullptr) throw InputError("plugin '" + path + "' declares no scheme family");

  PluginInfo info;
  info.path = absolute;
  info.name = d->name;
  info.version = d->version != nullptr ? d->version : "";
  info.abi_major = d->abi_major;
  info.abi_minor = d->abi_minor;
  Registry updated = registry;  // all families or none
  for (size_t i = 0; i < d->family_count; ++i) {
    FamilyInfo family = family_of(d->families[i], absolute, i, origin);
    info.families.push_back(family.name);
    updated.add(std::move(family));
  }
  registry = std::move(updated);
  return info;
}

}  // namespace

FamilyInfo plugin_family(const kvtune_family* table, const std::string& path, size_t index, const std::string& origin) {
  return family_of(table, path, index, origin);
}

PluginInfo load_plugin(Registry& registry, const std::string& path, const std::string& origin) {
  try {
    return load_plugin_unnamed(registry, path, origin);
  } catch (const InputError& e) {
    if (origin.empty()) throw;
    throw InputError(origin + ": " + e.what());
  }
}

std::vector<PluginInfo> load_plugins(Registry& registry, const std::vector<std::string>& paths,
                                     const std::string& origin) {
  std::vector<PluginInfo> out;
  for (const std::string& path : paths) out.push_back(load_plugin(registry, path, origin));
  return out;
}

std::optional<std::string> probe_plugin(const Registry& registry, const std::string& path, const std::string& origin,
                                        const IsolationOptions& options) {
  try {
    run_isolated_or_throw(
        [&] {
          Registry scratch = registry;
          load_plugin(scratch, path, origin);
          return std::string();
        },
        "plugin '" + path + "' (from " + origin + ")", options);
  } catch (const PluginFault& e) {
    return std::string(e.what()) + " while loading (dlopen and describe)";
  }
  return std::nullopt;
}

std::vector<std::string> plugin_path_entries(std::string_view value) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find(':', start);
    if (end == std::string_view::npos) end = value.size();
    const std::string dir(value.substr(start, end - start));
    start = end + 1;
    if (dir.empty()) continue;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw InputError("KVTUNE_PLUGIN_PATH: '" + dir + "' is not a directory");
    std::vector<std::string> found;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".so" && e.is_regular_file(ec)) found.push_back(e.path().string());
    }
    if (ec) throw InputError("KVTUNE_PLUGIN_PATH: cannot list '" + dir + "': " + ec.message());
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

std::vector<std::string> plugins_from_environment() {
  const char* value = std::getenv("KVTUNE_PLUGIN_PATH");
  return value == nullptr ? std::vector<std::string>{} : plugin_path_entries(value);
}

Registry registry_with_plugins(const Registry& base, const std::vector<std::string>& paths, const std::string& origin) {
  Registry registry = base;
  load_plugins(registry, paths, origin);
  return registry;
}

}  // namespace kvtune
