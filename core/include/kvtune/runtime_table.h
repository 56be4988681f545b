// Runtime capability tables: what each serving runtime (llama.cpp, vLLM, ...) can store in its KV
// cache, version by version, and the kvtune scheme pair that emulates each setting. Data, not code:
// read from configs/runtimes/NAME.toml (schema in docs/runtimes.md), so updating a runtime is
// editing a file and recommending is a lookup over runtime_options().
#pragma once

#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvtune/memory.h"
#include "kvtune/registry.h"

namespace kvtune {

// What the user sets and what comes with it. Entries of a table carry these; an expanded option
// gathers those of everything that made it (profile, K type, V type, matching pair rules).
struct RuntimeSettings {
  std::vector<std::string> cli;          // flags to paste: "-ctk q8_0", "--kv-cache-dtype fp8"
  std::vector<std::string> env;          // "NAME=VALUE"
  std::string python;                    // a config snippet for Python-configured runtimes
  std::vector<std::string> build;        // build-time requirements: "GGML_CUDA_FA_ALL_QUANTS=ON"
  std::vector<std::string> unsupported;  // where it cannot run: "CUDA flash attention (any build)"
  std::vector<std::string> caveats;      // what the emulation or the runtime does differently
  // What the user must have for the option to be theirs (a checkpoint with calibrated scales): a
  // recommendation that needs something also names the best option that needs nothing.
  std::vector<std::string> needs;
  bool needs_flash_attention = false;
  bool verified = true;  // false: a fact behind it could not be checked against the runtime's sources
};

// What a runtime gives its KV cache by default ([[context]] cache_share and share_of): `share` of
// each GPU's memory, which the weights, activations and cache then divide (vLLM's
// gpu_memory_utilization), or, with `of_free`, of the memory the weights leave (TensorRT-LLM's
// free_gpu_memory_fraction, LMDeploy's cache_max_entry_count).
struct CacheShare {
  double share = 1.0;
  bool of_free = false;
};

// [[key_layout]]: the channel order a runtime stores some model classes' keys in where it is not the
// order their checkpoint computes them in (llama.cpp's converter permutes a Llama k_proj so each
// RoPE pair sits in neighbouring channels): a value of the pair_order policy key (policy.h), which
// kvtune adds to the runtime's key specs for a model the rule holds for (architecture_in_scope).
struct KeyLayout {
  std::string pair_order;  // "adjacent"
  std::vector<std::string> for_architectures, except_architectures;  // at most one non-empty
  bool operator==(const KeyLayout&) const = default;
};

// One [[profiles]], [[k_types]], [[v_types]], [[pair_rules]] or [[options]] entry, as read.
struct RuntimeEntry {
  std::string name;            // option name, cache type value or profile name
  std::string k_spec, v_spec;  // canonical kvtune specs (k_types fill k_spec, v_types v_spec)
  std::string since, until;    // version range [since, until); empty = unbounded
  std::vector<std::string> profiles;                     // k/v types: the profiles they belong to (empty = all)
  std::vector<std::string> match_k, match_v, except;     // pair rules: values (empty = any), "K/V" exemptions
  std::vector<std::string> attention_types;  // layer exemptions: names taken in place of indices ("sliding_window")
  std::vector<std::string> divides;          // tensor parallel: kTensorParallelDivides the GPU count must meet
  std::optional<CacheShare> cache_share;     // context: the runtime's default share for its cache
  // context: how the runtime rounds each sequence's cells (slot_pad, sliding_extra, sliding_extra_above,
  // sliding_pad); unset where it allocates as kvtune's memory model counts.
  std::optional<CellAllocation> cells;
  std::optional<KeyLayout> key_layout;  // key layout: the order and the classes it holds for
  RuntimeSettings settings;
  std::string origin;  // file:line:column of the entry
};

// A runtime setting kvtune has no scheme for; listed so a recommendation can say so.
struct RuntimeNotEmulated {
  std::string setting, reason, since, until, origin;
};

struct RuntimeTable {
  std::string name;            // the file's stem: "llama-cpp"
  std::string title;           // "llama.cpp"
  std::string source;          // the runtime's repository or documentation
  std::string version_scheme;  // "semver" (0.11.2, 1.3.0rc27) or "build" (b8607)
  std::string oldest;          // oldest version the table covers; empty = no lower bound
  std::string checked;         // newest version the data was checked against; "latest" means it
  bool kv_independent = false;  // K and V set separately (types and pair rules) or jointly (options)
  std::vector<std::string> notes;
  std::vector<RuntimeEntry> profiles, k_types, v_types, pair_rules, options;
  // [[layer_exemptions]]: a setting that keeps listed layers at another dtype (vLLM
  // --kv-cache-dtype-skip-layers); k_spec = v_spec = what those layers keep, the cli or python
  // carries one of kLayersPlaceholders where the layer indices go. Versioned like options.
  std::vector<RuntimeEntry> layer_exemptions;
  // [[tensor_parallel]]: what spreads the cache over N GPUs (vLLM --tensor-parallel-size), its
  // cli/env/python/caveats carrying kGpusPlaceholder; or, for a runtime that needs no setting, only
  // caveats saying how it spreads the cache. Versioned like options.
  std::vector<RuntimeEntry> tensor_parallel;
  // [[context]]: what makes the runtime take sequences of a context length and hold a number of
  // them at once (vLLM --max-model-len, llama-server -c/-np), its cli/env/python/caveats carrying
  // kContextPlaceholders; or only caveats for a runtime whose cache needs no setting. Versioned like
  // options.
  std::vector<RuntimeEntry> context;
  // [[key_layout]]: the key channel order of the model classes it names (KeyLayout), its caveats
  // saying so beside every option it changes. Versioned like options.
  std::vector<RuntimeEntry> key_layouts;
  std::vector<RuntimeNotEmulated> not_emulated;
};

// One configuration a runtime version can express: the kvtune pair to evaluate and what to set.
struct RuntimeOption {
  std::string name;  // "q8_0/q4_0 (rotated)", "fp8, checkpoint scales"
  std::string k_spec, v_spec;
  RuntimeSettings settings;
  std::vector<std::string> origins;  // the entries it was made from, file:line:column
  std::vector<std::string> attention_types;  // a layer exemption's (RuntimeEntry::attention_types)
  std::vector<std::string> divides;          // a [[tensor_parallel]] entry's (RuntimeEntry::divides)
  std::optional<CacheShare> cache_share;     // a [[context]] entry's (RuntimeEntry::cache_share)
  std::optional<CellAllocation> cells;       // a [[context]] entry's (RuntimeEntry::cells)
  std::optional<KeyLayout> key_layout;       // a [[key_layout]] entry's (RuntimeEntry::key_layout)
};

struct RuntimeView {
  std::string title;            // the table's display name ("llama.cpp"), for recommendations
  std::string version;          // the version asked for ("latest" resolved)
  bool beyond_checked = false;  // newer than the table was checked against: options may be stale
  std::vector<RuntimeOption> options;
  std::vector<RuntimeNotEmulated> not_emulated;
  // The layer exemption this version offers (the first active [[layer_exemptions]] entry), if any.
  std::optional<RuntimeOption> layer_exemption;
  // The multi-GPU setting this version offers (the first active [[tensor_parallel]] entry), if any.
  std::optional<RuntimeOption> tensor_parallel;
  // The context and sequence setting this version offers (the first active [[context]] entry), if any.
  std::optional<RuntimeOption> context;
  // The key layouts of this version (every active [[key_layout]] entry; the first that holds for a
  // model is its).
  std::vector<RuntimeOption> key_layouts;
  // The pair order its options' keys were put in (apply_key_layout), or "" for the checkpoint's.
  std::string key_order;
};

// The cell rule of the view's [[context]] setting where it holds for a model of `architecture`
// (cell_rule_applies), or nullptr: kvtune's own count stands.
const CellAllocation* cells_for(const RuntimeView& view, std::string_view architecture);
// The first of the view's key layouts that holds for a model of `architecture`, or nullptr.
const RuntimeOption* key_layout_for(const RuntimeView& view, std::string_view architecture);
// Every option of `view` with its key spec in `layout`'s pair order (canonical through `registry`),
// the layout's caveats and origin joining the option's; an option already in it, or whose key
// scheme stores the same values in any channel order (SchemeTraits::channel_order_invariant), is
// left as it is; `more_caveats` join the changed options too. Sets view.key_order.
void apply_key_layout(RuntimeView& view, const RuntimeOption& layout, const Registry& registry,
                      const std::vector<std::string>& more_caveats = {});
// `k_spec` with its keys in `pair_order` (a pair_order policy value), canonical through `registry`.
std::string in_key_order(const std::string& k_spec, const std::string& pair_order, const Registry& registry);

// Where a [[layer_exemptions]] entry's cli/python takes the exempt layer indices: {layers} as
// "0,31", {layers_space} as "0 31" (an argparse nargs list), {layers_quoted} as "\"0\", \"31\"" (a
// Python list of strings).
inline constexpr std::array<const char*, 3> kLayersPlaceholders = {"{layers}", "{layers_space}", "{layers_quoted}"};

// Layer indices joined, each between `quote`s: ({0, 31}) "0,31"; (" ") "0 31"; (", ", "\"")
// "\"0\", \"31\"" (kLayersPlaceholders' three spellings, and how reports list exempt layers).
std::string format_layers(const std::vector<int64_t>& layers, std::string_view separator = ",",
                          std::string_view quote = "");

// `option` with `layers` kept at the exemption's dtype: its name says so, the exemption's
// settings (with the layer list filled in) join the option's.
RuntimeOption with_exempt_layers(const RuntimeOption& option, const RuntimeOption& exemption,
                                 const std::vector<int64_t>& layers);

// Where a [[tensor_parallel]] entry's settings take the GPU count.
inline constexpr std::string_view kGpusPlaceholder = "{gpus}";

// What a [[tensor_parallel]] entry's `divides` may name, the head counts a runtime splits over its
// GPUs and so refuses to start on a GPU count that does not fit them: "q_heads", the count divides
// the attention heads; "kv_heads", the KV heads and the count divide one into the other (replicated
// KV heads when there are more GPUs than heads).
inline constexpr std::array<const char*, 2> kTensorParallelDivides = {"q_heads", "kv_heads"};

// The entries of `divides` that a model of `q_heads` attention and `kv_heads` KV heads breaks on
// `gpus` GPUs (empty: the runtime can split it; a count below 1 is not known and breaks nothing).
std::vector<std::string> broken_gpu_divisions(const std::vector<std::string>& divides, int64_t q_heads,
                                              int64_t kv_heads, int64_t gpus);

// `option` on `gpus` GPUs: the [[tensor_parallel]] setting's cli, env and caveats (the count filled
// in) join the option's, and its python keyword arguments go into the option's call.
RuntimeOption with_tensor_parallel(const RuntimeOption& option, const RuntimeOption& setting, int64_t gpus);

// Where a [[context]] entry's settings take the serving shape: {ctx} the tokens of one sequence,
// {seqs} the sequences held at once, {tokens} their product (a cache sized in total tokens, such as
// llama-server's -c).
inline constexpr std::array<const char*, 3> kContextPlaceholders = {"{ctx}", "{seqs}", "{tokens}"};

// `option` serving `sequences` sequences of `context` tokens: the [[context]] setting's cli, env and
// caveats (placeholders filled in) join the option's, and its python keyword arguments go into the
// option's call.
RuntimeOption with_context(const RuntimeOption& option, const RuntimeOption& setting, int64_t context,
                           int64_t sequences);

// The attention-type names a [[layer_exemptions]] entry may take (kvtune can judge these).
inline constexpr std::array<const char*, 1> kExemptAttentionTypes = {"sliding_window"};

// `option` with every layer of `attention_type` kept at the exemption's dtype, the type's name in
// place of the layer list; the exemption must list it in attention_types.
RuntimeOption with_exempt_attention_type(const RuntimeOption& option, const RuntimeOption& exemption,
                                         const std::string& attention_type);

// Reads one table; every K/V spec is validated (and canonicalised) through `registry`. Errors are
// InputErrors naming file:line:column, the key and what was expected.
RuntimeTable parse_runtime_table(std::string_view text, const std::string& source_name, const std::string& name,
                                 const Registry& registry);
RuntimeTable load_runtime_table(const std::filesystem::path& path, const Registry& registry);  // name = stem

// Every <config_dir>/runtimes/*.toml, sorted by name.
std::vector<RuntimeTable> load_runtime_tables(const std::filesystem::path& config_dir, const Registry& registry);

// The table called `name`. InputError "<where>: unknown runtime '<name>'; valid ones are: ..." otherwise.
const RuntimeTable& runtime_table_named(const std::vector<RuntimeTable>& tables, const std::string& name,
                                        const std::string& where);

// The options available at `version` ("latest" = the table's `checked`, or every open-ended entry
// when it has none). For a K/V-independent runtime this is every active K type × V type within each
// active profile, with the matching pair rules applied. InputError for a malformed version or one
// older than the table covers.
RuntimeView runtime_options(const RuntimeTable& table, std::string_view version);

// Orders two versions of a scheme: <0, 0, >0. InputError (naming `what`) for a malformed one.
int compare_runtime_versions(const std::string& scheme, const std::string& a, const std::string& b,
                             const std::string& what = "version");

}  // namespace kvtune
