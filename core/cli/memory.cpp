// kvtune memory --model NAME | --layers L --kv-heads H --head-dim D, --ctx N, --k SPEC --v SPEC
//               [--gpu-mem SIZE|NxSIZE [--weights SIZE]] [--gpus N] [--runtime NAME[@VERSION]] [--json]
#include "kvtune/memory.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>
#include <utility>

#include "commands.h"
#include "plugins.h"
#include "kvtune/error.h"
#include "presets.h"

namespace kvtune::cli {
namespace {

struct MemoryOptions {
  std::string model;
  std::optional<int64_t> layers, kv_heads, head_dim, sliding_window, sliding_layers;
  int64_t ctx = 0;
  std::string k, v;
  std::string gpu_mem, weights;
  std::optional<int64_t> gpus;
  std::optional<std::string> runtime;  // NAME[@VERSION]: also the cache as that runtime allocates it
  bool json = false;
};

// The model: a preset by name or file, or a shape from --layers/--kv-heads/--head-dim.
struct Model {
  std::optional<ModelPreset> preset;
  ModelShape shape;
};

Model resolve_model(const MemoryOptions& o) {
  const bool shape_given = o.layers || o.kv_heads || o.head_dim || o.sliding_window || o.sliding_layers;
  Model m;
  if (!o.model.empty()) {
    if (shape_given) {
      throw InputError("give either --model or --layers/--kv-heads/--head-dim (and --sliding-*), not both");
    }
    m.preset = resolve_model_preset(o.model);
    m.shape = m.preset->shape;
    return m;
  }
  std::vector<std::string> missing;
  if (!o.layers) missing.push_back("--layers");
  if (!o.kv_heads) missing.push_back("--kv-heads");
  if (!o.head_dim) missing.push_back("--head-dim");
  if (!missing.empty()) {
    throw InputError("give --model NAME, or --layers, --kv-heads and --head-dim (missing: " + join(missing) + ")");
  }
  if (o.sliding_window.has_value() != o.sliding_layers.has_value()) {
    throw InputError(
        "--sliding-window and --sliding-layers go together (the window in tokens and how many layers use it)");
  }
  m.shape = {*o.layers, *o.kv_heads, *o.head_dim, o.sliding_window.value_or(0), o.sliding_layers.value_or(0)};
  if (m.shape.sliding_layers > m.shape.layers) {
    throw InputError("--sliding-layers " + std::to_string(m.shape.sliding_layers) + " is more than --layers " +
                     std::to_string(m.shape.layers));
  }
  return m;
}

SchemePtr make_scheme(const std::string& option, const std::string& spec) {
  try {
    return command_registry().make(spec);
  } catch (const InputError& e) {
    throw InputError(option + ": " + e.what());
  }
}

// What the weights take: --weights, else bf16 weights of the preset's parameter count.
struct Weights {
  uint64_t bytes = 0;
  std::string origin;
};

std::optional<Weights> resolve_weights(const MemoryOptions& o, const Model& m) {
  if (o.gpu_mem.empty()) {
    if (!o.weights.empty()) throw InputError("--weights needs --gpu-mem (the weights are subtracted from it)");
    return std::nullopt;
  }
  if (!o.weights.empty()) return Weights{parse_size(o.weights, "--weights"), "--weights"};
  if (m.preset && m.preset->parameters > 0) {
    // bf16 (2 bytes per parameter) is how these checkpoints are published and most often served.
    return Weights{2 * static_cast<uint64_t>(m.preset->parameters),
                   "bf16: 2 bytes x " + std::to_string(m.preset->parameters) + " parameters"};
  }
  throw InputError("--gpu-mem needs --weights SIZE" +
                   std::string(m.preset ? " (the preset '" + m.preset->name + "' gives no parameter count)"
                                        : " (or --model NAME, whose bf16 weights are the default)"));
}

std::string describe_shape(const Model& m) {
  const ModelShape& s = m.shape;
  std::string text = std::to_string(s.layers) + " layers";
  if (s.sliding_layers > 0) {
    text += " (" + std::to_string(s.sliding_layers) + " with a " + std::to_string(s.sliding_window) +
            "-token sliding window)";
  }
  text += ", " + std::to_string(s.kv_heads) + " KV heads, head_dim " + std::to_string(s.head_dim);
  return m.preset ? m.preset->name + ": " + text : text;
}

// --runtime: the cache as the runtime allocates it, where its [[context]] entry declares how it
// rounds cells (RuntimeEntry::cells), for one sequence of --ctx and, with --gpu-mem, for as many as
// fit (Ollama's batch, and so its sliding layers, grows with the sequences' tokens together).
struct RuntimeMemory {
  std::string title, version;
  bool beyond_checked = false;
  std::optional<AllocatedCells> cells;  // none: the table declares no rounding (kvtune's count stands)
  MemoryEstimate estimate;
  GpuFit fit;
  std::optional<AllocatedCells> cells_at_max;  // the cells of each of fit.sequences sequences
};

RuntimeView runtime_view(const std::string& text) {
  const RuntimeTarget target = parse_runtime_target(text, "--runtime");
  const std::vector<RuntimeTable> tables = command_runtime_tables(command_registry());
  const RuntimeTable& table = runtime_table_named(tables, target.name, "--runtime");
  try {
    return runtime_options(table, target.version);
  } catch (const InputError& e) {
    throw InputError("--runtime '" + text + "': " + e.what());
  }
}

std::optional<RuntimeMemory> runtime_memory(const MemoryOptions& o, const Model& m, const SchemePtr& k,
                                            const SchemePtr& v, std::optional<uint64_t> gpu_bytes,
                                            uint64_t weight_bytes, int64_t gpus) {
  if (!o.runtime) return std::nullopt;
  const RuntimeView view = runtime_view(*o.runtime);
  RuntimeMemory out{view.title, view.version, view.beyond_checked, std::nullopt, {}, {}, std::nullopt};
  const auto at = [&](const std::optional<AllocatedCells>& cells) {
    const MemoryEstimate e = cells ? estimate_memory(allocated_shape(m.shape, *cells), cells->slot, scheme_storage(k),
                                                     scheme_storage(v))
                                   : estimate_memory(m.shape, o.ctx, scheme_storage(k), scheme_storage(v));
    return std::pair{e, fit_per_gpu(m.shape, e, gpu_bytes.value_or(0), weight_bytes, gpus)};
  };
  const std::string architecture = m.preset ? m.preset->architecture : std::string();
  const CellAllocation* rule = cells_for(view, architecture);
  if (rule) out.cells = allocated_cells(m.shape, o.ctx, 1, *rule);
  std::tie(out.estimate, out.fit) = at(out.cells);
  if (!rule || !gpu_bytes) return out;
  // One sequence's cells are the fewest, so its count bounds every other; the most that fit at their
  // own cells is the first count down from there that does.
  for (uint64_t s = out.fit.sequences; s > 0; --s) {
    const AllocatedCells cells = allocated_cells(m.shape, o.ctx, int64_t(s), *rule);
    if (at(cells).second.sequences >= s) {
      out.cells_at_max = cells;
      out.fit.sequences = s;
      return out;
    }
  }
  out.fit.sequences = 0;
  return out;
}

// "1536 on a sliding one (1024 + 512, rounded up)", or the slot where the window and extra reach it.
std::string sliding_cells_text(const AllocatedCells& c, int64_t window) {
  if (c.sliding_full) return "as many on a sliding one (sized as a full one; the window is not kept apart)";
  if (c.sliding == c.slot) return "as many on a sliding one (" + std::to_string(window) + " + " +
                                  std::to_string(c.sliding_extra) + " reach the slot)";
  return std::to_string(c.sliding) + " on a sliding one (" + std::to_string(window) + " + " +
         std::to_string(c.sliding_extra) + ", rounded up)";
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

int run(const MemoryOptions& o) {
  const Model m = resolve_model(o);
  const SchemePtr k = make_scheme("--k", o.k), v = make_scheme("--v", o.v);
  std::optional<uint64_t> gpu_bytes;
  std::optional<int64_t> size_gpus;  // N of --gpu-mem NxSIZE
  if (!o.gpu_mem.empty()) {
    const GpuMemory g = parse_gpu_memory(o.gpu_mem, "--gpu-mem");
    gpu_bytes = g.bytes;
    size_gpus = g.gpus;
  }
  const int64_t gpus = gpu_count(size_gpus, "--gpu-mem", o.gpus, "--gpus");
  const std::optional<Weights> weights = resolve_weights(o, m);
  const MemoryEstimate e = estimate_memory(m.shape, o.ctx, scheme_storage(k), scheme_storage(v));
  // Per GPU of the tensor-parallel group; without --gpu-mem only the cache figures mean anything.
  const GpuFit fit = fit_per_gpu(m.shape, e, gpu_bytes.value_or(0), weights ? weights->bytes : 0, gpus);
  std::optional<uint64_t> sequences;
  if (gpu_bytes) sequences = fit.sequences;
  const std::optional<RuntimeMemory> runtime =
      runtime_memory(o, m, k, v, gpu_bytes, weights ? weights->bytes : 0, gpus);
  if (m.preset && o.ctx > m.preset->max_context) {
    std::cerr << "kvtune: note: --ctx " << o.ctx << " is beyond " << m.preset->name << "'s max_context "
              << m.preset->max_context << "\n";
  }

  if (o.json) {
    nlohmann::json out = {{"model", m.preset ? nlohmann::json(m.preset->name) : nlohmann::json(nullptr)},
                          {"layers", m.shape.layers},
                          {"kv_heads", m.shape.kv_heads},
                          {"head_dim", m.shape.head_dim},
                          {"sliding_window", m.shape.sliding_window},
                          {"sliding_layers", m.shape.sliding_layers},
                          {"ctx", o.ctx},
                          {"k", k->spec()},
                          {"v", v->spec()},
                          {"k_bits", e.k_bits},
                          {"v_bits", e.v_bits},
                          {"bytes_per_token", e.bytes_per_token},
                          {"total_bytes", e.total_bytes},
                          {"gpu_mem_bytes", gpu_bytes ? nlohmann::json(*gpu_bytes) : nlohmann::json(nullptr)},
                          {"weight_bytes", weights ? nlohmann::json(weights->bytes) : nlohmann::json(nullptr)},
                          {"max_sequences", sequences ? nlohmann::json(*sequences) : nlohmann::json(nullptr)},
                          {"gpus", gpus},
                          {"kv_heads_per_gpu", fit.kv_heads},
                          {"bytes_per_sequence_per_gpu", fit.sequence_bytes},
                          {"weight_bytes_per_gpu", weights ? nlohmann::json(fit.weight_bytes) : nlohmann::json(nullptr)},
                          {"free_bytes_per_gpu", gpu_bytes ? nlohmann::json(fit.free_bytes) : nlohmann::json(nullptr)}};
    if (m.preset) out["source"] = m.preset->source;
    if (runtime) {
      const auto or_null = [](bool has, int64_t n) { return has ? nlohmann::json(n) : nlohmann::json(nullptr); };
      const std::optional<AllocatedCells>& c = runtime->cells;
      const std::optional<AllocatedCells>& at_max = runtime->cells_at_max;
      const bool sliding = c && c->sliding > 0;
      out["runtime"] = {{"title", runtime->title},
                        {"version", runtime->version},
                        {"beyond_checked", runtime->beyond_checked},
                        {"rounds_cells", c.has_value()},
                        {"slot_cells", or_null(c.has_value(), c ? c->slot : 0)},
                        {"sliding_cells", or_null(sliding, sliding ? c->sliding : 0)},
                        {"sliding_extra", or_null(sliding, sliding ? c->sliding_extra : 0)},
                        {"sliding_full", c ? nlohmann::json(c->sliding_full) : nlohmann::json(nullptr)},
                        {"full_layers", or_null(c.has_value(), c ? c->full_layers : 0)},
                        {"sliding_layers", or_null(c.has_value(), c ? c->sliding_layers : 0)},
                        {"layer_group", or_null(c && c->layer_group > 0, c ? c->layer_group : 0)},
                        {"total_bytes", runtime->estimate.total_bytes},
                        {"bytes_per_sequence_per_gpu", runtime->fit.sequence_bytes},
                        {"max_sequences", gpu_bytes ? nlohmann::json(runtime->fit.sequences) : nlohmann::json(nullptr)},
                        {"sliding_cells_at_max",
                         or_null(at_max && at_max->sliding > 0, at_max ? at_max->sliding : 0)}};
    } else {
      out["runtime"] = nullptr;
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }

  auto row = [](const std::string& label, const std::string& value) {
    std::cout << label << std::string(label.size() < 15 ? 15 - label.size() : 1, ' ') << value << "\n";
  };
  row("model", describe_shape(m));
  row("context", std::to_string(o.ctx) + " tokens");
  row("k_bits", fixed(e.k_bits, 3) + "  (" + k->spec() + ")");
  row("v_bits", fixed(e.v_bits, 3) + "  (" + v->spec() + ")");
  row("per token", format_bytes(e.bytes_per_token, 1) + "/token  (" + fixed(e.bytes_per_token, 0) + " bytes" +
                       (m.shape.sliding_layers > 0 ? ", averaged over the context; sliding layers hold " +
                                                         std::to_string(e.sliding_tokens) + " tokens"
                                                   : std::string()) +
                       ")");
  row("per sequence", format_bytes(static_cast<double>(e.total_bytes), 2) + "  (" + std::to_string(e.total_bytes) +
                          " bytes at " + std::to_string(o.ctx) + " tokens)");
  const bool split = gpus > 1;
  if (split) {
    row("gpus", std::to_string(gpus) + ", tensor parallel: " + std::to_string(fit.kv_heads) + " of " +
                    std::to_string(m.shape.kv_heads) + " KV heads per GPU" +
                    (gpus > m.shape.kv_heads ? " (replicated: more GPUs than KV heads)" : ""));
    row("per GPU", format_bytes(static_cast<double>(fit.sequence_bytes), 2) + " per sequence  (" +
                       std::to_string(fit.sequence_bytes) + " bytes)");
  }
  if (gpu_bytes) {
    const std::string per_gpu = split ? " per GPU" : "";
    row("gpu memory", format_bytes(static_cast<double>(*gpu_bytes), 2) + per_gpu + "  (" +
                          std::to_string(*gpu_bytes) + " bytes)");
    row("weights", format_bytes(static_cast<double>(weights->bytes), 2) + "  (" + std::to_string(weights->bytes) +
                       " bytes, " + weights->origin + ")");
    if (split) {
      row("weights/GPU", format_bytes(static_cast<double>(fit.weight_bytes), 2) + "  (" +
                             std::to_string(fit.weight_bytes) + " bytes: split evenly over " + std::to_string(gpus) +
                             " GPUs; replicated embeddings and norms not counted)");
      row("free per GPU", format_bytes(static_cast<double>(fit.free_bytes), 2) + "  (" +
                              std::to_string(fit.free_bytes) + " bytes)");
    }
    row("max sequences",
        std::to_string(*sequences) + (fit.weight_bytes >= *gpu_bytes ? "  (the weights alone do not fit)"
                                                                     : "  of " + std::to_string(o.ctx) + " tokens"));
  }
  if (runtime) {
    const std::string who = runtime->title + " " + runtime->version +
                            (runtime->beyond_checked ? " (newer than its table was checked against)" : "");
    if (!runtime->cells) {
      const char* sliding = " (a recommendation's caveats say how it sizes a sliding layer)";
      row("runtime", who + ": its table declares no cell rounding, so kvtune's count above is all there is" +
                         (m.shape.sliding_layers > 0 ? sliding : ""));
      return 0;
    }
    const AllocatedCells& c = *runtime->cells;
    std::string cells = std::to_string(c.slot) + " cells per layer";
    if (c.sliding > 0) {
      cells = std::to_string(c.slot) + " cells on a full layer, " + sliding_cells_text(c, m.shape.sliding_window);
    }
    row("runtime", who + ": " + cells + padded_layers_text(m.shape, c));
    row("allocated", format_bytes(static_cast<double>(runtime->estimate.total_bytes), 2) + " per sequence  (" +
                         std::to_string(runtime->estimate.total_bytes) + " bytes)" +
                         (split ? "; " + format_bytes(static_cast<double>(runtime->fit.sequence_bytes), 2) + " per GPU"
                                : std::string()));
    if (gpu_bytes) {
      const std::optional<AllocatedCells>& at_max = runtime->cells_at_max;
      const bool grew = at_max && at_max->sliding != c.sliding;
      row("max sequences", std::to_string(runtime->fit.sequences) + "  as " + runtime->title + " allocates" +
                               (grew ? " (each sliding layer then " + std::to_string(at_max->sliding) +
                                           " cells: the batch grows with the sequences' tokens together)"
                                     : std::string()));
    }
  }
  return 0;
}

}  // namespace

Runner add_memory(CLI::App& app) {
  auto o = std::make_shared<MemoryOptions>();
  app.add_option("--model", o->model, "model preset (configs/models/NAME.toml) or the path of a preset .toml");
  app.add_option("--layers", o->layers, "layers (without --model)")->check(CLI::Range(int64_t(1), int64_t(4096)));
  app.add_option("--kv-heads", o->kv_heads, "KV heads per layer (without --model)")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  app.add_option("--head-dim", o->head_dim, "channels per head (without --model)")
      ->check(CLI::Range(int64_t(1), int64_t(65536)));
  app.add_option("--sliding-window", o->sliding_window, "tokens a sliding-window layer keeps (with --sliding-layers)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  app.add_option("--sliding-layers", o->sliding_layers, "how many layers use the sliding window")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  app.add_option("--ctx", o->ctx, "context length in tokens")
      ->required()
      ->check(CLI::Range(int64_t(1), int64_t(1) << 32));
  app.add_option("--k", o->k, "key scheme spec, e.g. f16, q8_0, int:bits=4,axis=channel,group=32")->required();
  app.add_option("--v", o->v, "value scheme spec")->required();
  app.add_option("--gpu-mem", o->gpu_mem,
                 "GPU memory: 80GiB, 141GB, 512MiB, 1.5TiB or bytes; NxSIZE (2x80GiB) for N GPUs of SIZE each");
  app.add_option("--gpus", o->gpus, "tensor-parallel GPUs: KV heads and weights split across them (default 1)")
      ->check(CLI::Range(int64_t(1), kMaxGpus));
  app.add_option("--weights", o->weights, "weight bytes (default with --model: bf16, 2 bytes x parameters)");
  app.add_option("--runtime", o->runtime,
                 "also the cache as runtime NAME[@VERSION] allocates it, where its table (configs/runtimes) "
                 "declares how for the model");
  app.add_flag("--json", o->json, "print JSON instead of text");
  return [o] { return run(*o); };
}

}  // namespace kvtune::cli
