// A plugin written with the SDK whose schemes throw: the SDK must turn every exception into a
// status and a message, and the host must report it as an InputError naming the plugin.
//   cpp_throwing             quantize and dequantize throw std::runtime_error (-> KVTUNE_STATUS_INTERNAL)
//   cpp_throwing:refuse      quantize throws kvtune::InputError (-> KVTUNE_STATUS_INVALID_INPUT)
//   cpp_throwing:explode     the factory itself throws
#include <stdexcept>

#include "kvtune/plugin_sdk.h"

namespace {

class ThrowingScheme final : public kvtune::plugin::SchemeBase {
 public:
  ThrowingScheme(std::string spec, bool refuse) : spec_(std::move(spec)), refuse_(refuse) {}
  std::string spec() const override { return spec_; }
  size_t footprint(int64_t tokens, int64_t head_dim) const override { return size_t(tokens * head_dim); }
  std::vector<std::byte> quantize(kvtune::ConstMatrixView, const kvtune::QuantContext&) const override {
    if (refuse_) throw kvtune::InputError("cpp_throwing refuses this block (test plugin)");
    throw std::runtime_error("cpp_throwing: quantize always throws (test plugin)");
  }
  void dequantize(std::span<const std::byte>, const kvtune::QuantContext&, kvtune::MatrixView) const override {
    throw std::runtime_error("cpp_throwing: dequantize always throws (test plugin)");
  }

 private:
  std::string spec_;
  bool refuse_;
};

std::vector<kvtune::plugin::Family> families() {
  kvtune::plugin::Family f;
  f.name = "cpp_throwing";
  f.summary = "throws from every callback (test plugin)";
  f.params = {
      {.name = "refuse", .kind = kvtune::ParamDomain::Kind::flag, .help = "throw InputError instead"},
      {.name = "explode", .kind = kvtune::ParamDomain::Kind::flag, .help = "throw from the factory"},
  };
  f.make = [](const kvtune::plugin::Params& p) -> std::shared_ptr<const kvtune::plugin::SchemeBase> {
    if (p.flag("explode")) throw std::logic_error("cpp_throwing: the factory exploded (test plugin)");
    return std::make_shared<ThrowingScheme>(p.canonical(), p.flag("refuse"));
  };
  return {f};
}

}  // namespace

KVTUNE_PLUGIN("kvtune-test-throwing", "0.1", families)
