// The C++ side of the plugin SDK (header-only; docs/plugin-guide.md). A plugin author writes a
// class derived from kvtune::plugin::SchemeBase and a list of kvtune::plugin::Family, then
//
//   KVTUNE_PLUGIN("my-plugin", "1.0.0", my_families)   // std::vector<Family> my_families();
//
// generates the C tables of kvtune/plugin_abi.h and the entry point. Every callback catches
// exceptions: kvtune::InputError becomes KVTUNE_STATUS_INVALID_INPUT with its message, any other
// exception KVTUNE_STATUS_INTERNAL; nothing is thrown across the boundary.
//
// Linking: nothing. SchemeBase and Params mirror kvtune::Scheme and kvtune::SchemeParams but are
// defined entirely in this header, so a plugin links no kvtune library (the CMake target
// kvtune::plugin_sdk is header-only). The kvtune headers a plugin may also use are the header-only
// ones: matrix.h, error.h, numeric/*.h, codecs/*.h; ParamDomain and QuantContext are plain structs
// from scheme.h (QuantContext::rope is always null in a plugin: rope_stage=pre is applied by the
// host around the scheme).
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "kvtune/error.h"
#include "kvtune/matrix.h"
#include "kvtune/plugin_abi.h"
#include "kvtune/scheme.h"
#include "kvtune/spec.h"

namespace kvtune::plugin {

// Parameter values after the host validated them against the family's domains (defaults filled
// in): the same accessors as kvtune::SchemeParams.
class Params {
 public:
  Params(std::string family, std::vector<ParamDomain> domains, std::map<std::string, std::string> values)
      : family_(std::move(family)), domains_(std::move(domains)), values_(std::move(values)) {}

  const std::string& family() const { return family_; }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  int64_t integer(const std::string& name) const {
    int64_t v = 0;
    if (const auto it = values_.find(name); it != values_.end()) {
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
    }
    return v;
  }
  double real(const std::string& name) const {
    double v = 0.0;
    if (const auto it = values_.find(name); it != values_.end()) {
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
    }
    return v;
  }
  const std::string& choice(const std::string& name) const {
    static const std::string empty;
    const auto it = values_.find(name);
    return it == values_.end() ? empty : it->second;
  }
  bool flag(const std::string& name) const { return has(name); }

  // The registry's spelling (kvtune::canonical_spec), so a plugin's spec round-trips through it.
  std::string canonical() const { return canonical_spec(family_, domains_, values_); }

 private:
  std::string family_;
  std::vector<ParamDomain> domains_;
  std::map<std::string, std::string> values_;
};

// A configured scheme, as kvtune::Scheme (scheme.h) with the members a plugin can provide.
// Immutable after construction; every member may run concurrently on several threads.
class SchemeBase {
 public:
  virtual ~SchemeBase() = default;

  virtual std::string spec() const = 0;  // canonical; usually Params::canonical()

  // Empty when a [tokens, head_dim] block can be stored, else the reason.
  virtual std::string check_shape(int64_t tokens, int64_t head_dim) const {
    if (tokens < 1 || head_dim < 1) return "'" + spec() + "': a block needs at least one token and one channel";
    return {};
  }

  // Exact packed bytes of a block; quantize returns exactly this many.
  virtual size_t footprint(int64_t tokens, int64_t head_dim) const = 0;
  virtual std::vector<std::byte> quantize(ConstMatrixView block, const QuantContext& ctx) const = 0;
  // The host has checked the shape and that packed.size() == footprint(out.rows, out.cols).
  virtual void dequantize(std::span<const std::byte> packed, const QuantContext& ctx, MatrixView out) const = 0;

  // Fused path; must equal dequantize(quantize(block)) bit for bit.
  virtual void roundtrip(ConstMatrixView block, const QuantContext& ctx, MatrixView out) const {
    dequantize(quantize(block, ctx), ctx, out);
  }

  // A copy with static scales fitted on `sample`, or nullptr when the scheme has none.
  virtual std::shared_ptr<const SchemeBase> calibrate(ConstMatrixView /*sample*/, const QuantContext& /*ctx*/) const {
    return nullptr;
  }

  // What kvtune must know about the scheme (ABI 1.1, kvtune_scheme::traits): rotates_rows,
  // estimates_logits, needs_positions, needs_rope and static_scales are passed on; the other fields
  // are kvtune's to set. Read once, when the scheme is made.
  virtual SchemeTraits traits() const { return {}; }

 protected:
  // Throws InputError with check_shape's reason.
  void require_shape(int64_t tokens, int64_t head_dim) const {
    const std::string why = check_shape(tokens, head_dim);
    if (!why.empty()) throw InputError(why);
  }
};

// One family: its name, a one-line summary, its parameters (kvtune::ParamDomain, in canonical
// order) and a factory that receives validated parameters.
struct Family {
  std::string name;
  std::string summary;
  std::vector<ParamDomain> params;
  std::function<std::shared_ptr<const SchemeBase>(const Params&)> make;
};

namespace detail {

// Thrown inside a callback to return a specific status.
struct StatusError : std::exception {
  StatusError(int32_t s, std::string m) : status(s), message(std::move(m)) {}
  const char* what() const noexcept override { return message.c_str(); }
  int32_t status;
  std::string message;
};

inline void write_error(char* error, size_t error_size, const char* message) {
  if (error == nullptr || error_size == 0) return;
  const size_t n = std::min(std::strlen(message), error_size - 1);
  std::memcpy(error, message, n);
  error[n] = '\0';
}

// Runs f and turns every exception into a status and a message: nothing crosses the C boundary.
template <class F>
int32_t guarded(char* error, size_t error_size, F&& f) noexcept {
  try {
    f();
    return KVTUNE_STATUS_OK;
  } catch (const StatusError& e) {
    write_error(error, error_size, e.message.c_str());
    return e.status;
  } catch (const InputError& e) {
    write_error(error, error_size, e.what());
    return KVTUNE_STATUS_INVALID_INPUT;
  } catch (const std::exception& e) {
    write_error(error, error_size, (std::string("internal error: ") + e.what()).c_str());
    return KVTUNE_STATUS_INTERNAL;
  } catch (...) {
    write_error(error, error_size, "internal error: unknown exception");
    return KVTUNE_STATUS_INTERNAL;
  }
}

inline QuantContext context_of(const kvtune_quant_context* c) {
  QuantContext ctx;
  if (c == nullptr) return ctx;
  if (KVTUNE_ABI_HAS(c, kvtune_quant_context, role)) ctx.role = c->role == KVTUNE_ROLE_VALUE ? Role::value : Role::key;
  if (KVTUNE_ABI_HAS(c, kvtune_quant_context, position_count) && c->positions != nullptr) {
    ctx.positions = std::span<const int64_t>(c->positions, c->position_count);
  }
  if (KVTUNE_ABI_HAS(c, kvtune_quant_context, seed)) ctx.seed = c->seed;
  return ctx;
}

struct SchemeState {
  std::shared_ptr<const SchemeBase> scheme;
  std::string spec;
};

// The C handle: kvtune_scheme first, so a kvtune_scheme* is a Handle* (standard layout).
struct Handle {
  kvtune_scheme header;
  SchemeState* state;
};

inline const SchemeBase& scheme_of(const kvtune_scheme* self) {
  return *reinterpret_cast<const Handle*>(self)->state->scheme;
}

kvtune_scheme* make_handle(std::shared_ptr<const SchemeBase> scheme);

inline uint32_t trait_bits(const SchemeTraits& t) {
  return (t.rotates_rows ? KVTUNE_TRAIT_ROTATES_ROWS : 0u) | (t.estimates_logits ? KVTUNE_TRAIT_ESTIMATES_LOGITS : 0u) |
         (t.needs_positions ? KVTUNE_TRAIT_NEEDS_POSITIONS : 0u) | (t.needs_rope ? KVTUNE_TRAIT_NEEDS_ROPE : 0u) |
         (t.static_scales ? KVTUNE_TRAIT_STATIC_SCALES : 0u);
}

struct Callbacks {
  static const char* spec(const kvtune_scheme* self) {
    return reinterpret_cast<const Handle*>(self)->state->spec.c_str();
  }
  static int32_t check_shape(const kvtune_scheme* self, int64_t tokens, int64_t head_dim, char* error,
                             size_t error_size) {
    return guarded(error, error_size, [&] {
      const std::string why = scheme_of(self).check_shape(tokens, head_dim);
      if (!why.empty()) throw StatusError(KVTUNE_STATUS_INVALID_INPUT, why);
    });
  }
  static int32_t footprint(const kvtune_scheme* self, int64_t tokens, int64_t head_dim, uint64_t* bytes, char* error,
                           size_t error_size) {
    return guarded(error, error_size, [&] { *bytes = scheme_of(self).footprint(tokens, head_dim); });
  }
  static int32_t quantize(const kvtune_scheme* self, const float* block, int64_t tokens, int64_t head_dim,
                          const kvtune_quant_context* ctx, uint8_t* packed, size_t capacity, size_t* written,
                          char* error, size_t error_size) {
    return guarded(error, error_size, [&] {
      const std::vector<std::byte> out = scheme_of(self).quantize({block, tokens, head_dim}, context_of(ctx));
      if (out.size() > capacity) {
        throw StatusError(KVTUNE_STATUS_BUFFER_TOO_SMALL,
                          "'" + scheme_of(self).spec() + "': quantize produced " + std::to_string(out.size()) +
                              " bytes, more than the " + std::to_string(capacity) + " of the buffer");
      }
      if (!out.empty()) std::memcpy(packed, out.data(), out.size());
      *written = out.size();
    });
  }
  static int32_t dequantize(const kvtune_scheme* self, const uint8_t* packed, size_t packed_size,
                            const kvtune_quant_context* ctx, float* out, int64_t tokens, int64_t head_dim,
                            char* error, size_t error_size) {
    return guarded(error, error_size, [&] {
      scheme_of(self).dequantize({reinterpret_cast<const std::byte*>(packed), packed_size}, context_of(ctx),
                                 {out, tokens, head_dim});
    });
  }
  static int32_t roundtrip(const kvtune_scheme* self, const float* block, int64_t tokens, int64_t head_dim,
                           const kvtune_quant_context* ctx, float* out, char* error, size_t error_size) {
    return guarded(error, error_size, [&] {
      scheme_of(self).roundtrip({block, tokens, head_dim}, context_of(ctx), {out, tokens, head_dim});
    });
  }
  static int32_t calibrate(const kvtune_scheme* self, const float* sample, int64_t tokens, int64_t head_dim,
                           const kvtune_quant_context* ctx, kvtune_scheme** calibrated, char* error,
                           size_t error_size) {
    return guarded(error, error_size, [&] {
      *calibrated = nullptr;
      std::shared_ptr<const SchemeBase> fitted = scheme_of(self).calibrate({sample, tokens, head_dim}, context_of(ctx));
      if (fitted) *calibrated = make_handle(std::move(fitted));
    });
  }
  static void destroy(kvtune_scheme* self) {
    Handle* handle = reinterpret_cast<Handle*>(self);
    delete handle->state;
    delete handle;
  }
};

inline const kvtune_scheme_vtable& vtable() {
  static const kvtune_scheme_vtable table = {
      sizeof(kvtune_scheme_vtable), &Callbacks::spec,      &Callbacks::check_shape, &Callbacks::footprint,
      &Callbacks::quantize,         &Callbacks::dequantize, &Callbacks::roundtrip,  &Callbacks::calibrate,
      &Callbacks::destroy};
  return table;
}

inline kvtune_scheme* make_handle(std::shared_ptr<const SchemeBase> scheme) {
  if (!scheme) throw std::logic_error("a family's make returned no scheme");
  auto state = std::make_unique<SchemeState>(SchemeState{scheme, scheme->spec()});
  auto* handle = new Handle{{sizeof(kvtune_scheme), &vtable(), trait_bits(scheme->traits())}, state.get()};
  state.release();
  return &handle->header;
}

inline int32_t kind_of(ParamDomain::Kind kind) {
  switch (kind) {
    case ParamDomain::Kind::integer:
      return KVTUNE_PARAM_INTEGER;
    case ParamDomain::Kind::choice:
      return KVTUNE_PARAM_CHOICE;
    case ParamDomain::Kind::flag:
      return KVTUNE_PARAM_FLAG;
    case ParamDomain::Kind::real:
      return KVTUNE_PARAM_REAL;
  }
  return KVTUNE_PARAM_INTEGER;
}

// The C tables of one family; kvtune_family first, so a kvtune_family* is a FamilyEntry*.
struct FamilyEntry {
  kvtune_family table;
  const Family* family;
};

inline int32_t create(const kvtune_family* self, const char* const* keys, const char* const* values, size_t count,
                      kvtune_scheme** out, char* error, size_t error_size) {
  return guarded(error, error_size, [&] {
    *out = nullptr;
    const Family& family = *reinterpret_cast<const FamilyEntry*>(self)->family;
    std::map<std::string, std::string> given;
    for (size_t i = 0; i < count; ++i) given[keys[i]] = values[i];
    *out = make_handle(family.make(Params(family.name, family.params, std::move(given))));
  });
}

// Everything the description points into, built once per process and never freed (plugins are
// never unloaded). Pointers into the vectors are taken after they stop growing.
class Tables {
 public:
  Tables(const char* name, const char* version, std::vector<Family> families)
      : name_(name), version_(version), families_(std::move(families)) {
    const size_t n = families_.size();
    domains_.resize(n);
    domain_ptrs_.resize(n);
    choices_.resize(n);
    examples_.resize(n);
    entries_.resize(n);
    for (size_t f = 0; f < n; ++f) {
      const Family& family = families_[f];
      if (!family.make) throw std::logic_error("family '" + family.name + "' has no make function");
      const size_t p_count = family.params.size();
      choices_[f].resize(p_count);
      examples_[f].resize(p_count);
      for (size_t p = 0; p < p_count; ++p) {
        for (const std::string& c : family.params[p].choices) choices_[f][p].push_back(c.c_str());
        for (const std::string& e : family.params[p].examples) examples_[f][p].push_back(e.c_str());
      }
      for (size_t p = 0; p < p_count; ++p) {
        const ParamDomain& d = family.params[p];
        domains_[f].push_back(kvtune_param_domain{sizeof(kvtune_param_domain), d.name.c_str(), kind_of(d.kind),
                                                  d.help.c_str(), d.default_value.c_str(), d.min, d.max,
                                                  choices_[f][p].data(), choices_[f][p].size(),
                                                  examples_[f][p].data(), examples_[f][p].size(),
                                                  d.in_canonical ? 1 : 0, d.power_of_two ? 1 : 0});
      }
      for (const kvtune_param_domain& d : domains_[f]) domain_ptrs_[f].push_back(&d);
      entries_[f] = FamilyEntry{{sizeof(kvtune_family), family.name.c_str(), family.summary.c_str(),
                                 domain_ptrs_[f].data(), domain_ptrs_[f].size(), &create},
                                &family};
    }
    for (const FamilyEntry& e : entries_) family_ptrs_.push_back(&e.table);
    description_ = kvtune_plugin_description{sizeof(kvtune_plugin_description), KVTUNE_PLUGIN_ABI_MAJOR,
                                             KVTUNE_PLUGIN_ABI_MINOR,           name_.c_str(),
                                             version_.c_str(),                  family_ptrs_.data(),
                                             family_ptrs_.size()};
  }
  Tables(const Tables&) = delete;
  Tables& operator=(const Tables&) = delete;

  const kvtune_plugin_description* description() const { return &description_; }

 private:
  std::string name_, version_;
  std::vector<Family> families_;
  std::vector<std::vector<kvtune_param_domain>> domains_;
  std::vector<std::vector<const kvtune_param_domain*>> domain_ptrs_;
  std::vector<std::vector<std::vector<const char*>>> choices_, examples_;
  std::vector<FamilyEntry> entries_;
  std::vector<const kvtune_family*> family_ptrs_;
  kvtune_plugin_description description_{};
};

}  // namespace detail
}  // namespace kvtune::plugin

// Defines the plugin's entry point. families_function: std::vector<kvtune::plugin::Family>(), called
// once, on the first load; an exception from it is reported to the host as the load's error.
#define KVTUNE_PLUGIN(plugin_name, plugin_version, families_function)                                          \
  extern "C" KVTUNE_PLUGIN_EXPORT int32_t kvtune_plugin_describe(                                              \
      uint32_t /*host_abi_major*/, uint32_t /*host_abi_minor*/, const kvtune_plugin_description** out,         \
      char* error, size_t error_size) {                                                                        \
    return ::kvtune::plugin::detail::guarded(error, error_size, [&] {                                          \
      static const ::kvtune::plugin::detail::Tables tables((plugin_name), (plugin_version), families_function()); \
      *out = tables.description();                                                                             \
    });                                                                                                        \
  }
