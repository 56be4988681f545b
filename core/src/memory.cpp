#include "kvtune/memory.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

#include "kvtune/error.h"

namespace kvtune {
namespace {

uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) throw InputError(std::string(what) + " does not fit in 64 bits");
  return out;
}

uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
  uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) throw InputError(std::string(what) + " does not fit in 64 bits");
  return out;
}

struct SizeUnit {
  const char* name;  // lower case
  uint64_t bytes;
};

// SI units are powers of 1000 (as GPU vendors quote memory: an H200 has 141 GB), IEC units powers
// of 1024 (as nvidia-smi and allocators count).
constexpr std::array<SizeUnit, 10> kSizeUnits = {{{"", 1},
                                                  {"b", 1},
                                                  {"kb", 1000ull},
                                                  {"mb", 1000ull * 1000},
                                                  {"gb", 1000ull * 1000 * 1000},
                                                  {"tb", 1000ull * 1000 * 1000 * 1000},
                                                  {"kib", 1ull << 10},
                                                  {"mib", 1ull << 20},
                                                  {"gib", 1ull << 30},
                                                  {"tib", 1ull << 40}}};

[[noreturn]] void bad_size(std::string_view text, std::string_view what, const std::string& why) {
  throw InputError(std::string(what) + " '" + std::string(text) + "': " + why +
                   "; expected a size like 80GiB, 141GB, 512MiB, 1.5TiB or a plain byte count like 1000 "
                   "(KB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB powers of 1024; B is bytes)");
}

}  // namespace

std::string check_model_shape(const ModelShape& s) {
  if (s.layers < 1) return "layers must be at least 1, got " + std::to_string(s.layers);
  if (s.kv_heads < 1) return "kv_heads must be at least 1, got " + std::to_string(s.kv_heads);
  if (s.head_dim < 1) return "head_dim must be at least 1, got " + std::to_string(s.head_dim);
  if (s.sliding_layers < 0 || s.sliding_layers > s.layers) {
    return "sliding layers must be in 0.." + std::to_string(s.layers) + " (the layer count), got " +
           std::to_string(s.sliding_layers);
  }
  if (s.sliding_window < 0) return "sliding window must not be negative, got " + std::to_string(s.sliding_window);
  if ((s.sliding_layers > 0) != (s.sliding_window > 0)) {
    return "a sliding window and a count of sliding layers go together (window " + std::to_string(s.sliding_window) +
           ", sliding layers " + std::to_string(s.sliding_layers) + ")";
  }
  return "";
}

RoleStorage scheme_storage(SchemePtr scheme) {
  return [scheme = std::move(scheme)](int64_t tokens, int64_t head_dim) -> uint64_t {
    const std::string why = scheme->check_shape(tokens, head_dim);
    if (!why.empty()) {
      throw InputError("'" + scheme->spec() + "' cannot store a [" + std::to_string(tokens) + ", " +
                       std::to_string(head_dim) + "] block: " + why);
    }
    return scheme->footprint(tokens, head_dim);
  };
}

MemoryEstimate estimate_memory(const ModelShape& shape, int64_t context, const RoleStorage& k, const RoleStorage& v) {
  if (const std::string why = check_model_shape(shape); !why.empty()) throw InputError("model shape: " + why);
  if (context < 1) throw InputError("context must be at least 1 token, got " + std::to_string(context));
  MemoryEstimate e;
  const uint64_t k_full = k(context, shape.head_dim), v_full = v(context, shape.head_dim);
  const double elements = static_cast<double>(context) * static_cast<double>(shape.head_dim);
  e.k_bits = 8.0 * static_cast<double>(k_full) / elements;
  e.v_bits = 8.0 * static_cast<double>(v_full) / elements;

  // A sliding layer never holds more than its window: at long context it costs min(ctx, window).
  uint64_t per_head = checked_mul(static_cast<uint64_t>(shape.layers - shape.sliding_layers),
                                  checked_add(k_full, v_full, "the cache size"), "the cache size");
  if (shape.sliding_layers > 0) {
    e.sliding_tokens = std::min(context, shape.sliding_window);
    const uint64_t sliding =
        checked_add(k(e.sliding_tokens, shape.head_dim), v(e.sliding_tokens, shape.head_dim), "the cache size");
    per_head =
        checked_add(per_head, checked_mul(static_cast<uint64_t>(shape.sliding_layers), sliding, "the cache size"),
                    "the cache size");
  }
  e.total_bytes = checked_mul(per_head, static_cast<uint64_t>(shape.kv_heads), "the cache size");
  e.bytes_per_token = static_cast<double>(e.total_bytes) / static_cast<double>(context);
  return e;
}

bool architecture_in_scope(const std::vector<std::string>& only, const std::vector<std::string>& except,
                           std::string_view architecture) {
  const auto listed = [&](const std::vector<std::string>& names) {
    return std::find(names.begin(), names.end(), architecture) != names.end();
  };
  if (!only.empty()) return listed(only);
  return !listed(except);
}

bool cell_rule_applies(const CellAllocation& a, std::string_view architecture) {
  return architecture_in_scope(a.for_architectures, a.except_architectures, architecture);
}

AllocatedCells allocated_cells(const ModelShape& shape, int64_t context, int64_t sequences, const CellAllocation& a) {
  const auto pad = [](int64_t n, int64_t to) { return (n + to - 1) / to * to; };
  AllocatedCells out;
  out.slot = pad(context, std::max<int64_t>(a.slot_pad, 1));
  out.full_layers = shape.layers - shape.sliding_layers;
  out.sliding_layers = shape.sliding_layers;
  if (shape.sliding_layers == 0) return out;
  if (a.pad_layer_groups && out.full_layers > 0) {
    const int64_t fewer = std::min(out.full_layers, out.sliding_layers);
    const int64_t more = std::max(out.full_layers, out.sliding_layers);
    out.layer_group = 2 * more < 3 * fewer ? more : fewer;  // more < 1.5 x fewer: one group of each
    out.full_layers = pad(out.full_layers, out.layer_group);
    out.sliding_layers = pad(out.sliding_layers, out.layer_group);
  }
  if (a.sliding_full) {
    out.sliding = out.slot;
    out.sliding_full = true;
    return out;
  }
  out.sliding_extra = a.sliding_extra;
  for (const auto& [tokens, extra] : a.sliding_extra_above) {
    if (double(context) * double(std::max<int64_t>(sequences, 1)) > double(tokens)) out.sliding_extra = extra;
  }
  out.sliding = pad(std::min(out.slot, shape.sliding_window + out.sliding_extra), std::max<int64_t>(a.sliding_pad, 1));
  return out;
}

ModelShape allocated_shape(const ModelShape& shape, const AllocatedCells& cells) {
  ModelShape out = shape;
  if (out.sliding_layers > 0) {
    out.sliding_window = cells.sliding;
    out.layers = cells.full_layers + cells.sliding_layers;
    out.sliding_layers = cells.sliding_layers;
  }
  return out;
}

std::string padded_layers_text(const ModelShape& shape, const AllocatedCells& cells) {
  std::string text;
  const auto add = [&](int64_t allocated, int64_t own, const char* kind) {
    if (allocated != own) text += "; " + std::to_string(allocated) + " " + kind + " layers for " + std::to_string(own);
  };
  add(cells.full_layers, shape.layers - shape.sliding_layers, "full");
  add(cells.sliding_layers, shape.sliding_layers, "sliding");
  if (!text.empty()) text += " (groups of " + std::to_string(cells.layer_group) + ")";
  return text;
}

uint64_t max_sequences(uint64_t gpu_bytes, uint64_t weight_bytes, uint64_t sequence_bytes) {
  if (weight_bytes >= gpu_bytes || sequence_bytes == 0) return 0;
  return (gpu_bytes - weight_bytes) / sequence_bytes;
}

int64_t kv_heads_per_gpu(int64_t kv_heads, int64_t gpus) {
  if (kv_heads < 1) throw InputError("kv_heads must be at least 1, got " + std::to_string(kv_heads));
  if (gpus < 1) throw InputError("the GPU count must be at least 1, got " + std::to_string(gpus));
  // The runtimes' rule (memory.h): the ceiling, so replicated heads (N >= kv_heads) cost 1 each.
  return (kv_heads + gpus - 1) / gpus;
}

uint64_t weights_per_gpu(uint64_t weight_bytes, int64_t gpus) {
  const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(gpus, 1));
  return weight_bytes / n + (weight_bytes % n != 0);
}

GpuFit fit_per_gpu(const ModelShape& shape, const MemoryEstimate& estimate, uint64_t gpu_bytes,
                   uint64_t weight_bytes, int64_t gpus) {
  if (gpus < 1 || gpus > kMaxGpus) {
    throw InputError("the GPU count must be in 1.." + std::to_string(kMaxGpus) + ", got " + std::to_string(gpus));
  }
  GpuFit f;
  f.gpus = gpus;
  f.kv_heads = kv_heads_per_gpu(shape.kv_heads, gpus);
  // Every KV head of a layer costs the same, so the whole cache divides exactly by kv_heads.
  f.sequence_bytes = checked_mul(estimate.total_bytes / static_cast<uint64_t>(shape.kv_heads),
                                 static_cast<uint64_t>(f.kv_heads), "the cache size");
  f.gpu_bytes = gpu_bytes;
  f.weight_bytes = weights_per_gpu(weight_bytes, gpus);
  f.free_bytes = gpu_bytes > f.weight_bytes ? gpu_bytes - f.weight_bytes : 0;
  f.sequences = max_sequences(gpu_bytes, f.weight_bytes, f.sequence_bytes);
  return f;
}

GpuMemory parse_gpu_memory(std::string_view text, std::string_view what) {
  const size_t x = text.find_first_of("xX");  // no size unit has an x
  if (x == std::string_view::npos) {
    const uint64_t bytes = parse_size(text, what);
    if (bytes == 0) throw InputError(std::string(what) + " '" + std::string(text) + "': a GPU needs more than 0 bytes");
    return {std::nullopt, bytes};
  }
  const std::string_view count = text.substr(0, x);
  auto bad = [&](const std::string& why) -> GpuMemory {
    throw InputError(std::string(what) + " '" + std::string(text) + "': " + why +
                     "; expected a size like 80GiB, or NxSIZE like 2x80GiB for N GPUs of SIZE each");
  };
  if (count.empty() || count.find_first_not_of("0123456789") != std::string_view::npos) {
    return bad("the GPU count before 'x' must be a whole number");
  }
  const int64_t gpus = count.size() > 9 ? kMaxGpus + 1 : std::stoll(std::string(count));
  if (gpus < 1 || gpus > kMaxGpus) return bad("the GPU count must be in 1.." + std::to_string(kMaxGpus));
  if (text.substr(x + 1).empty()) return bad("no size after 'x'");
  const uint64_t bytes = parse_size(text.substr(x + 1), std::string(what) + " '" + std::string(text) + "': the size");
  if (bytes == 0) return bad("a GPU needs more than 0 bytes");
  return {gpus, bytes};
}

int64_t gpu_count(std::optional<int64_t> from_size, std::string_view size_what, std::optional<int64_t> given,
                  std::string_view given_what) {
  if (from_size && given && *from_size != *given) {
    throw InputError(std::string(given_what) + " " + std::to_string(*given) + " disagrees with " +
                     std::string(size_what) + " " + std::to_string(*from_size) + "xSIZE (" +
                     std::to_string(*from_size) + " GPUs); give the count once, or the same in both");
  }
  return from_size.value_or(given.value_or(1));
}

uint64_t parse_size(std::string_view text, std::string_view what) {
  auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  const size_t whole_begin = i;
  while (i < text.size() && is_digit(text[i])) ++i;
  const std::string_view whole = text.substr(whole_begin, i - whole_begin);
  std::string_view fraction;
  if (i < text.size() && text[i] == '.') {
    const size_t fraction_begin = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    fraction = text.substr(fraction_begin, i - fraction_begin);
  }
  if (whole.empty() && fraction.empty()) bad_size(text, what, "no number");
  while (i < text.size() && is_space(text[i])) ++i;
  const size_t unit_begin = i;
  std::string unit;  // lower case, for the lookup
  for (; i < text.size() && !is_space(text[i]); ++i)
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  const std::string_view written = text.substr(unit_begin, i - unit_begin);
  while (i < text.size() && is_space(text[i])) ++i;
  if (i != text.size()) bad_size(text, what, "unexpected text after the unit");
  const auto found =
      std::find_if(kSizeUnits.begin(), kSizeUnits.end(), [&](const SizeUnit& u) { return unit == u.name; });
  if (found == kSizeUnits.end()) bad_size(text, what, "unknown unit '" + std::string(written) + "'");

  try {
    uint64_t bytes = 0;
    for (char c : whole) {
      bytes = checked_add(checked_mul(bytes, 10, "the size"), static_cast<uint64_t>(c - '0'), "the size");
    }
    bytes = checked_mul(bytes, found->bytes, "the size");
    if (!fraction.empty()) {
      // The fractional part is below one unit (at most 2^40 bytes), well inside double's exact range.
      const double part = std::stod("0." + std::string(fraction)) * static_cast<double>(found->bytes);
      bytes = checked_add(bytes, static_cast<uint64_t>(std::llround(part)), "the size");
    }
    return bytes;
  } catch (const InputError&) {
    bad_size(text, what, "too large (the limit is 2^64 - 1 bytes)");
  }
}

std::string format_bytes(double bytes, int decimals) {
  static constexpr std::array<const char*, 6> kUnits = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t unit = 0;
  while (bytes >= 1024.0 && unit + 1 < kUnits.size()) {
    bytes /= 1024.0;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.*f %s", unit == 0 ? 0 : decimals, bytes, kUnits[unit]);
  return text;
}

}  // namespace kvtune
