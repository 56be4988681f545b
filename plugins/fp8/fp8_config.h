// What an `fp8` scheme is configured with, its parameter domains and its canonical spelling; shared
// by the family's factory (fp8_family.cpp) and the scheme (fp8_scheme.cpp), whose calibrate() must
// spell the scheme it returns the way the registry would.
#pragma once

#include <string>
#include <vector>

#include "kvtune/codecs/fp8_codec.h"
#include "kvtune/scheme.h"

namespace kvtune::builtin {

enum class Fp8ScaleMode {
  unit,        // 1.0: what a runtime uses when the checkpoint has no k_scale/v_scale
  fixed,       // `scale=static`: the given `value`
  calibrated,  // amax / max_finite fitted by calibrate(); fitted on each block until then
  dynamic,     // amax / max_finite of every group, computed as the block is quantized
};

// The scheme sees one KV head's [T, D] block, so `tensor` and `head` both mean one scale per block
// (they are kept apart because runtimes name them differently); `token` is one scale per row.
enum class Fp8Granularity { tensor, head, token };

struct Fp8Config {
  codec::Fp8Format format = codec::Fp8Format::e4m3;
  Fp8ScaleMode scale = Fp8ScaleMode::unit;
  Fp8Granularity granularity = Fp8Granularity::tensor;
  float value = 1.0f;  // the scale of scale=static (a float32 > 0); unused otherwise
};

// The family's parameters in declaration (= canonical) order.
const std::vector<ParamDomain>& fp8_domains();

// The canonical spec, with `value` spelled as the shortest decimal that parses back to the same
// float32, so calibrate()'s result round-trips through the registry.
std::string fp8_canonical_spec(const Fp8Config& config);

// A scheme for a configuration already validated by the family's factory.
SchemePtr make_fp8_scheme(const Fp8Config& config);

}  // namespace kvtune::builtin
