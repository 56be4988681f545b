/* kvtune plugin ABI: the plain-C boundary between kvtune and an out-of-tree scheme library
 * (DESIGN §3, docs/plugin-guide.md). This header compiles as C11 and as C++; it includes nothing
 * from kvtune and no C++ type crosses it.
 *
 * A plugin is a shared library that exports one function, KVTUNE_PLUGIN_ENTRY_POINT:
 *
 *   int32_t kvtune_plugin_describe(uint32_t host_abi_major, uint32_t host_abi_minor,
 *                                  const kvtune_plugin_description** out,
 *                                  char* error, size_t error_size);
 *
 * It returns a description (ABI version, plugin name and version, a table of scheme families)
 * that stays valid, unchanged, until the process ends: kvtune never unloads a plugin. Each family
 * describes its parameters and creates configured schemes; a scheme is a handle whose vtable
 * quantizes and dequantizes blocks. C++ authors do not write these tables by hand:
 * kvtune/plugin_sdk.h generates them from a C++ class.
 *
 * Versioning rules (the loader enforces them; the plugin-guide repeats them):
 *  - MAJOR changes when any existing field moves, changes type or meaning, or a callback's
 *    signature changes. kvtune refuses a plugin whose major differs from its own, naming both
 *    versions. Frozen across every major: the entry point's name and signature, and the first
 *    three fields of kvtune_plugin_description (struct_size, abi_major, abi_minor), so any host
 *    can read any plugin's version and refuse it cleanly.
 *  - MINOR changes when a field is appended at the end of a table. Tables only grow at the end
 *    and every table begins with its struct_size (sizeof the table as its writer compiled it).
 *    A host loads a plugin of any minor: it reads a field only when the table's struct_size
 *    covers it (KVTUNE_ABI_HAS), so fields a newer plugin appended are ignored and fields an
 *    older plugin lacks read as absent. The same rule binds the plugin for tables the host
 *    passes in (kvtune_quant_context).
 *  - Errors cross as status codes plus a caller-provided buffer that the callee fills with a
 *    NUL-terminated, possibly truncated, message. No exception, longjmp or abort may cross.
 *  - Every callback except destroy may be called concurrently from several threads on the
 *    same handle: schemes are immutable after creation.
 *  - Blocks are row-major float32 [tokens, head_dim]: rows are tokens, columns head-dim
 *    channels. Quantize divides by the stored scale, dequantize multiplies.
 */
#ifndef KVTUNE_PLUGIN_ABI_H
#define KVTUNE_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

/* The ABI this header describes. The installed CMake package's version is MAJOR.MINOR, and its
 * version file accepts requests of the same major only (SameMajorVersion). */
#define KVTUNE_PLUGIN_ABI_MAJOR 1
#define KVTUNE_PLUGIN_ABI_MINOR 1
/* 1.1 appended kvtune_scheme::traits. */

/* The one symbol a plugin exports. */
#define KVTUNE_PLUGIN_ENTRY_POINT "kvtune_plugin_describe"

#if defined(_WIN32)
#define KVTUNE_PLUGIN_EXPORT __declspec(dllexport)
#else
#define KVTUNE_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* True when `table` (a pointer to a table of type `type`) was written with `field` in it. */
#define KVTUNE_ABI_HAS(table, type, field) \
  ((table)->struct_size >= offsetof(type, field) + sizeof(((const type*)0)->field))

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes returned by every fallible callback. */
enum {
  KVTUNE_STATUS_OK = 0,
  KVTUNE_STATUS_INVALID_INPUT = 1,    /* the input was wrong: a parameter, a shape, a packed size */
  KVTUNE_STATUS_BUFFER_TOO_SMALL = 2, /* an output buffer cannot hold the result */
  KVTUNE_STATUS_INTERNAL = 3          /* anything else: a bug in the plugin (a caught exception) */
};

enum { KVTUNE_ROLE_KEY = 0, KVTUNE_ROLE_VALUE = 1 };

/* Parameter kinds, as kvtune::ParamDomain::Kind. */
enum {
  KVTUNE_PARAM_INTEGER = 0, /* decimal integer in [min, max], optionally a power of two */
  KVTUNE_PARAM_CHOICE = 1,  /* one of `choices` */
  KVTUNE_PARAM_FLAG = 2,    /* bare word, set or not */
  KVTUNE_PARAM_REAL = 3     /* finite decimal number */
};

/* One parameter of a family: enough for kvtune to validate specs and enumerate sweep grids. */
typedef struct kvtune_param_domain {
  size_t struct_size; /* sizeof(kvtune_param_domain) */
  const char* name;   /* spec key; not a policy key (rotation, sink_tokens, ...) */
  int32_t kind;       /* KVTUNE_PARAM_* */
  const char* help;   /* one line; may be NULL */
  const char* default_value; /* NULL or "": unset by default */
  int64_t min;               /* integer: inclusive bounds */
  int64_t max;
  const char* const* choices; /* choice: the allowed values */
  size_t choice_count;
  const char* const* examples; /* representative values for grids (may be NULL) */
  size_t example_count;
  int32_t in_canonical; /* nonzero: always spelled out in the canonical spec */
  int32_t power_of_two; /* integer: nonzero = must be a power of two */
} kvtune_param_domain;

/* What a scheme may need besides the block. Written by the host; read only the fields that
 * KVTUNE_ABI_HAS says are there. */
typedef struct kvtune_quant_context {
  size_t struct_size;       /* sizeof(kvtune_quant_context) as the host compiled it */
  int32_t role;             /* KVTUNE_ROLE_* */
  const int64_t* positions; /* absolute token position of each row; NULL when unknown */
  size_t position_count;    /* 0 or the block's token count */
  uint64_t seed;            /* for random rotations or codebooks */
} kvtune_quant_context;

typedef struct kvtune_scheme kvtune_scheme;

/* The operations of a configured scheme. Required: spec, footprint, quantize, dequantize,
 * destroy. Optional (NULL): check_shape (any block with tokens, head_dim >= 1 is accepted),
 * roundtrip (the host composes dequantize after quantize), calibrate (the scheme has no static
 * scales). Sizes are in bytes, shapes in tokens and channels. */
typedef struct kvtune_scheme_vtable {
  size_t struct_size; /* sizeof(kvtune_scheme_vtable) */

  /* The canonical spec, e.g. "nf4:group=64"; parsing it must give an equal scheme. Owned by the
   * handle, valid until destroy. */
  const char* (*spec)(const kvtune_scheme* self);

  /* OK when a [tokens, head_dim] block can be stored, else INVALID_INPUT with the reason. */
  int32_t (*check_shape)(const kvtune_scheme* self, int64_t tokens, int64_t head_dim, char* error,
                         size_t error_size);

  /* Exact packed bytes of a block: payload plus scales, indices, codebooks. */
  int32_t (*footprint)(const kvtune_scheme* self, int64_t tokens, int64_t head_dim, uint64_t* bytes,
                       char* error, size_t error_size);

  /* block: float [tokens, head_dim]. Writes the packed block to packed[0..capacity) and its size to
   * *written; the host passes capacity = footprint. BUFFER_TOO_SMALL when it does not fit. */
  int32_t (*quantize)(const kvtune_scheme* self, const float* block, int64_t tokens, int64_t head_dim,
                      const kvtune_quant_context* ctx, uint8_t* packed, size_t capacity, size_t* written,
                      char* error, size_t error_size);

  /* packed: packed_size bytes (the host has checked packed_size == footprint). out: float
   * [tokens, head_dim]. */
  int32_t (*dequantize)(const kvtune_scheme* self, const uint8_t* packed, size_t packed_size,
                        const kvtune_quant_context* ctx, float* out, int64_t tokens, int64_t head_dim,
                        char* error, size_t error_size);

  /* Optional fused quantize + dequantize; must equal dequantize(quantize(block)) bit for bit. */
  int32_t (*roundtrip)(const kvtune_scheme* self, const float* block, int64_t tokens, int64_t head_dim,
                       const kvtune_quant_context* ctx, float* out, char* error, size_t error_size);

  /* Optional: a new scheme with static scales fitted on sample [tokens, head_dim], or *calibrated =
   * NULL when the scheme is unchanged. The host destroys the new handle. */
  int32_t (*calibrate)(const kvtune_scheme* self, const float* sample, int64_t tokens, int64_t head_dim,
                       const kvtune_quant_context* ctx, kvtune_scheme** calibrated, char* error,
                       size_t error_size);

  /* Releases the handle. Called exactly once, when no other call on it is running. */
  void (*destroy)(kvtune_scheme* self);
} kvtune_scheme_vtable;

/* Bits of kvtune_scheme::traits: what the scheme does that kvtune must know (kvtune::SchemeTraits).
 * A scheme declares them itself; kvtune never infers them from its spec or family name. */
#define KVTUNE_TRAIT_ROTATES_ROWS (1u << 0)     /* stores rows in a rotated basis: a constant row is not
                                                  constant in the stored codes */
#define KVTUNE_TRAIT_ESTIMATES_LOGITS (1u << 1) /* a score estimator (QJL-like): its dequantize is an
                                                  estimate, not a quantizer's fixed point */
#define KVTUNE_TRAIT_NEEDS_POSITIONS (1u << 2)  /* reads kvtune_quant_context::positions */
#define KVTUNE_TRAIT_NEEDS_ROPE (1u << 3)       /* the keys it is given must carry RoPE */
#define KVTUNE_TRAIT_STATIC_SCALES (1u << 4)    /* calibrate fits static scales on a sample */

/* A configured scheme. Plugins allocate it with this header first (C: embed it as the first member
 * of their own struct and cast back in the callbacks). One per handle (not per vtable or family),
 * so each configuration, and each calibrated copy, declares its own traits. */
struct kvtune_scheme {
  size_t struct_size; /* sizeof(kvtune_scheme) */
  const kvtune_scheme_vtable* vtable;
  uint32_t traits; /* ABI 1.1: KVTUNE_TRAIT_* bits; read only when struct_size covers it (a 1.0
                      handle, struct_size 2 * sizeof(void*), has none) */
};

/* A family of schemes: "nf4" with its parameters. */
typedef struct kvtune_family {
  size_t struct_size; /* sizeof(kvtune_family) */
  const char* name;   /* the spec's family word: letters, digits, '_', '-', '.' */
  const char* summary;
  const kvtune_param_domain* const* params; /* param_count pointers, in canonical spec order */
  size_t param_count;

  /* Creates a scheme. keys/values: every parameter that is set after validation against the
   * domains, defaults filled in, in no particular order; a set flag has the value "". Cross-parameter
   * refusals (INVALID_INPUT) name the spec. */
  int32_t (*create)(const struct kvtune_family* self, const char* const* keys, const char* const* values,
                    size_t count, kvtune_scheme** out, char* error, size_t error_size);
} kvtune_family;

/* What the entry point returns. */
typedef struct kvtune_plugin_description {
  size_t struct_size; /* frozen across majors: sizeof(kvtune_plugin_description) */
  uint32_t abi_major; /* frozen across majors: KVTUNE_PLUGIN_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor; /* frozen across majors: KVTUNE_PLUGIN_ABI_MINOR the plugin was built with */
  const char* name;    /* the plugin's name, e.g. "kvtune-nf4" */
  const char* version; /* the plugin's own version, e.g. "1.0.0" */
  const kvtune_family* const* families; /* family_count pointers */
  size_t family_count;
} kvtune_plugin_description;

/* The entry point's type; see KVTUNE_PLUGIN_ENTRY_POINT. host_abi_* are the host's version, for
 * information: refusing is the host's job. */
typedef int32_t (*kvtune_plugin_describe_fn)(uint32_t host_abi_major, uint32_t host_abi_minor,
                                             const kvtune_plugin_description** out, char* error,
                                             size_t error_size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KVTUNE_PLUGIN_ABI_H */
