/* A kvtune scheme plugin in plain C11, against kvtune/plugin_abi.h alone: the proof that the ABI
 * header is C. Family TEST_FAMILY_NAME ("c_int8"): per-token symmetric absmax integer codes, one
 * int8 per element behind one f32 scale per token; parameter bits (2..8). It leaves check_shape,
 * roundtrip and calibrate NULL, so the host's defaults run.
 *
 * The same source builds the deliberately broken variants of tests/plugins/CMakeLists.txt:
 *   TEST_ABI_MAJOR=N            reports ABI major N (TEST_ABI_MINOR=M: minor M)
 *   TEST_FOOTPRINT_LIE=N        footprint claims N bytes more than quantize writes
 *   TEST_QUANTIZE_FAILS         quantize returns KVTUNE_STATUS_INVALID_INPUT with a message
 *   TEST_SHORT_DESCRIPTION      the description's struct_size stops before its name field
 *   TEST_CRASH=1|2|3|4          quantize segfaults (a real null store) | abort()s | exit(3)s | loops
 *                               forever; with TEST_CRASH_BITS=N only for bits=N
 *   TEST_CRASH_IN_DESCRIBE      the entry point segfaults
 *   TEST_CRASH_IN_CREATE=1|2|3  create segfaults | abort()s | exit(3)s for bits=3 (other bits work)
 *   TEST_HUGE_FOOTPRINT         footprint claims 2^64 - 1 bytes
 *   TEST_SPEC_OF_ANOTHER_FAMILY its schemes call themselves int:bits=N (a built-in's spec)
 *   TEST_DEQUANTIZE_NAN         dequantize writes NaN into element 0
 *   TEST_CREATE_NULL            create returns OK without a scheme
 *   TEST_REFUSE_BITS=N          create refuses bits=N (INVALID_INPUT), a cross-parameter refusal
 *   TEST_TRAITS=BITS            each handle declares KVTUNE_TRAIT_* BITS (ABI 1.1)
 *   TEST_HANDLE_SIZE_10         handles say struct_size of ABI 1.0 (no traits field), with traits set */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvtune/plugin_abi.h"

#ifndef TEST_FAMILY_NAME
#define TEST_FAMILY_NAME "c_int8"
#endif
#ifndef TEST_ABI_MAJOR
#define TEST_ABI_MAJOR KVTUNE_PLUGIN_ABI_MAJOR
#endif
#ifndef TEST_ABI_MINOR
#define TEST_ABI_MINOR KVTUNE_PLUGIN_ABI_MINOR
#endif
#ifndef TEST_FOOTPRINT_LIE
#define TEST_FOOTPRINT_LIE 0
#endif
#ifndef TEST_TRAITS
#define TEST_TRAITS 0
#endif

#if defined(TEST_CRASH) || defined(TEST_CRASH_IN_DESCRIBE) || defined(TEST_CRASH_IN_CREATE)
/* volatile: the compiler cannot prove the pointer null and replace the store with a trap. */
static int* volatile null_pointer = NULL;
static volatile unsigned long spins = 0;

/* The null store is the crash these plugins exist for: UBSan's null check (clang's, under the
   sanitizer build) would report it and exit 1 before the SIGSEGV the tests expect. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
__attribute__((no_sanitize("null")))
#endif
#endif
static void crash(int how) {
  switch (how) {
    case 1:
      *null_pointer = 1;
      break;
    case 2:
      abort();
    case 3:
      exit(3);
    default:
      for (;;) ++spins;
  }
}
#endif

typedef struct c_scheme {
  kvtune_scheme header; /* first: a kvtune_scheme* is a c_scheme* */
  int bits;
  char spec[64];
} c_scheme;

static void set_error(char* error, size_t error_size, const char* message) {
  if (error != NULL && error_size > 0) {
    strncpy(error, message, error_size - 1);
    error[error_size - 1] = '\0';
  }
}

static const c_scheme* self_of(const kvtune_scheme* self) { return (const c_scheme*)self; }

static const char* c_spec(const kvtune_scheme* self) { return self_of(self)->spec; }

static uint64_t packed_size(int64_t tokens, int64_t head_dim) {
  return (uint64_t)(tokens * 4 + tokens * head_dim);
}

static int32_t c_footprint(const kvtune_scheme* self, int64_t tokens, int64_t head_dim, uint64_t* bytes,
                           char* error, size_t error_size) {
  (void)self;
  (void)error;
  (void)error_size;
#ifdef TEST_HUGE_FOOTPRINT
  (void)tokens;
  (void)head_dim;
  *bytes = UINT64_MAX;
#else
  *bytes = packed_size(tokens, head_dim) + TEST_FOOTPRINT_LIE;
#endif
  return KVTUNE_STATUS_OK;
}

static int32_t c_quantize(const kvtune_scheme* self, const float* block, int64_t tokens, int64_t head_dim,
                          const kvtune_quant_context* ctx, uint8_t* packed, size_t capacity, size_t* written,
                          char* error, size_t error_size) {
  const c_scheme* s = self_of(self);
  const float qmax = (float)((1 << (s->bits - 1)) - 1);
  const uint64_t need = packed_size(tokens, head_dim);
  int64_t r, c;
  (void)ctx;
#ifdef TEST_CRASH
#ifdef TEST_CRASH_BITS
  if (s->bits == TEST_CRASH_BITS) crash(TEST_CRASH);
#else
  crash(TEST_CRASH);
#endif
#endif
#ifdef TEST_QUANTIZE_FAILS
  (void)qmax;
  (void)need;
  (void)r;
  (void)c;
  (void)block;
  (void)packed;
  (void)capacity;
  (void)written;
  set_error(error, error_size, "c_failing refuses every block (test plugin)");
  return KVTUNE_STATUS_INVALID_INPUT;
#else
  if (capacity < need) {
    set_error(error, error_size, "buffer too small");
    return KVTUNE_STATUS_BUFFER_TOO_SMALL;
  }
  for (r = 0; r < tokens; ++r) {
    const float* x = block + r * head_dim;
    float amax = 0.0f, scale;
    for (c = 0; c < head_dim; ++c) {
      const float a = x[c] < 0 ? -x[c] : x[c];
      if (a > amax) amax = a;
    }
    scale = amax / qmax;
    memcpy(packed + 4 * r, &scale, 4);
    for (c = 0; c < head_dim; ++c) {
      int code = 0;
      if (scale > 0.0f) {
        const float v = x[c] / scale; /* half away from zero */
        code = v >= 0.0f ? (int)(v + 0.5f) : -(int)(-v + 0.5f);
        if (code > (int)qmax) code = (int)qmax;
        if (code < -(int)qmax) code = -(int)qmax;
      }
      packed[tokens * 4 + r * head_dim + c] = (uint8_t)(int8_t)code;
    }
  }
  *written = (size_t)need;
  return KVTUNE_STATUS_OK;
#endif
}

static int32_t c_dequantize(const kvtune_scheme* self, const uint8_t* packed, size_t packed_size_,
                            const kvtune_quant_context* ctx, float* out, int64_t tokens, int64_t head_dim,
                            char* error, size_t error_size) {
  int64_t r, c;
  (void)self;
  (void)ctx;
  if (packed_size_ < packed_size(tokens, head_dim)) {
    set_error(error, error_size, "packed block too short");
    return KVTUNE_STATUS_INVALID_INPUT;
  }
  for (r = 0; r < tokens; ++r) {
    float scale;
    memcpy(&scale, packed + 4 * r, 4);
    for (c = 0; c < head_dim; ++c) {
      out[r * head_dim + c] = (float)(int8_t)packed[tokens * 4 + r * head_dim + c] * scale;
    }
  }
#ifdef TEST_DEQUANTIZE_NAN
  if (tokens > 0 && head_dim > 0) out[0] = (float)NAN;
#endif
  return KVTUNE_STATUS_OK;
}

static void c_destroy(kvtune_scheme* self) { free(self); }

static const kvtune_scheme_vtable c_vtable = {
    sizeof(kvtune_scheme_vtable), c_spec, NULL, c_footprint, c_quantize, c_dequantize, NULL, NULL, c_destroy};

static int32_t c_create(const kvtune_family* family, const char* const* keys, const char* const* values,
                        size_t count, kvtune_scheme** out, char* error, size_t error_size) {
  size_t i;
  int bits = 8;
  c_scheme* s;
  (void)family;
  for (i = 0; i < count; ++i) {
    if (strcmp(keys[i], "bits") != 0) {
      set_error(error, error_size, "unexpected parameter");
      return KVTUNE_STATUS_INVALID_INPUT;
    }
    bits = atoi(values[i]);
  }
#ifdef TEST_CREATE_NULL
  *out = NULL;
  return KVTUNE_STATUS_OK;
#endif
#ifdef TEST_CRASH_IN_CREATE
  if (bits == 3) crash(TEST_CRASH_IN_CREATE);
#endif
#ifdef TEST_REFUSE_BITS
  if (bits == TEST_REFUSE_BITS) {
    set_error(error, error_size, TEST_FAMILY_NAME " refuses this bits value (test plugin)");
    return KVTUNE_STATUS_INVALID_INPUT;
  }
#endif
  s = (c_scheme*)calloc(1, sizeof(c_scheme));
  if (s == NULL) {
    set_error(error, error_size, "out of memory");
    return KVTUNE_STATUS_INTERNAL;
  }
#ifdef TEST_HANDLE_SIZE_10
  s->header.struct_size = offsetof(kvtune_scheme, traits);
  s->header.traits = KVTUNE_TRAIT_ROTATES_ROWS | KVTUNE_TRAIT_STATIC_SCALES; /* beyond struct_size: ignored */
#else
  s->header.struct_size = sizeof(kvtune_scheme);
  s->header.traits = TEST_TRAITS;
#endif
  s->header.vtable = &c_vtable;
  s->bits = bits;
#ifdef TEST_SPEC_OF_ANOTHER_FAMILY
  snprintf(s->spec, sizeof s->spec, "int:bits=%d", bits);
#else
  snprintf(s->spec, sizeof s->spec, "%s:bits=%d", TEST_FAMILY_NAME, bits);
#endif
  *out = &s->header;
  return KVTUNE_STATUS_OK;
}

static const kvtune_param_domain bits_domain = {
    sizeof(kvtune_param_domain), "bits", KVTUNE_PARAM_INTEGER, "code width", "8", 2, 8, NULL, 0, NULL, 0, 1, 0};
static const kvtune_param_domain* const c_params[] = {&bits_domain};

static const kvtune_family c_family = {
    sizeof(kvtune_family), TEST_FAMILY_NAME, "per-token absmax integers, written in C (test plugin)", c_params, 1,
    c_create};
static const kvtune_family* const c_families[] = {&c_family};

static const kvtune_plugin_description description = {
#ifdef TEST_SHORT_DESCRIPTION
    offsetof(kvtune_plugin_description, name),
#else
    sizeof(kvtune_plugin_description),
#endif
    TEST_ABI_MAJOR, TEST_ABI_MINOR, "kvtune-test-c", "0.1", c_families, 1};

KVTUNE_PLUGIN_EXPORT int32_t kvtune_plugin_describe(uint32_t host_abi_major, uint32_t host_abi_minor,
                                                    const kvtune_plugin_description** out, char* error,
                                                    size_t error_size) {
  (void)host_abi_major;
  (void)host_abi_minor;
#ifdef TEST_CRASH_IN_DESCRIBE
  crash(1);
#endif
  (void)error;
  (void)error_size;
  *out = &description;
  return KVTUNE_STATUS_OK;
}
