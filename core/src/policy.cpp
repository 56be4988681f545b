#include "kvtune/policy.h"

#include <algorithm>

#include "kvtune/codecs/hadamard.h"
#include "kvtune/error.h"

namespace kvtune {
namespace {

// Rotates each contiguous group of channels of every row (the transform is an involution, so the
// same call undoes it).
void rotate_rows(MatrixView x, int64_t group) {
  for (int64_t r = 0; r < x.rows; ++r) {
    for (int64_t c = 0; c < x.cols; c += group) hadamard_transform(x.row(r) + c, static_cast<int>(group));
  }
}

class RotatedScheme final : public Scheme {
 public:
  RotatedScheme(SchemePtr inner, CachePolicy policy) : inner_(std::move(inner)), policy_(policy) {}

  std::string spec() const override {
    const std::string inner = inner_->spec();
    const std::string suffix = policy_spec(policy_);
    return inner + (inner.find(':') == std::string::npos ? ":" + suffix.substr(1) : suffix);
  }
  std::string family() const override { return inner_->family(); }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string why = inner_->check_shape(tokens, head_dim);
    if (!why.empty()) return why;
    const int64_t g = policy_.rotation_group;
    if (g > 0 && head_dim % g != 0) {
      return "'" + spec() + "': rotation_group=" + std::to_string(g) + " does not divide head_dim " +
             std::to_string(head_dim);
    }
    return {};
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override { return inner_->footprint(tokens, head_dim); }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext& ctx) const override {
    return inner_->quantize(rotated(x, ctx), ctx);
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext& ctx, MatrixView out) const override {
    require_shape(out.rows, out.cols);  // the wrapper's own check: the group must divide head_dim
    inner_->dequantize(packed, ctx, out);
    unrotate(out, ctx);
  }

  void roundtrip(ConstMatrixView x, const QuantContext& ctx, MatrixView out) const override {
    inner_->roundtrip(rotated(x, ctx), ctx, out);
    unrotate(out, ctx);
  }

  std::shared_ptr<const Scheme> calibrate(ConstMatrixView sample, const QuantContext& ctx) const override {
    SchemePtr fitted = inner_->calibrate(rotated(sample, ctx), ctx);
    return fitted == inner_ ? shared_from_this() : std::make_shared<RotatedScheme>(fitted, policy_);
  }

 private:
  int64_t group_for(const QuantContext& ctx, int64_t head_dim) const {
    if (policy_.rotation_group > 0) return policy_.rotation_group;
    return llama_cpp_rotation_group(ctx.role, head_dim);
  }

  Matrix rotated(ConstMatrixView x, const QuantContext& ctx) const {
    const std::string why = check_shape(x.rows, x.cols);
    if (!why.empty()) throw InputError(why);
    Matrix copy = copy_of(x);
    if (const int64_t g = group_for(ctx, x.cols); g > 0) rotate_rows(copy, g);
    return copy;
  }

  void unrotate(MatrixView x, const QuantContext& ctx) const {
    if (const int64_t g = group_for(ctx, x.cols); g > 0) rotate_rows(x, g);
  }

  SchemePtr inner_;
  CachePolicy policy_;
};

}  // namespace

const std::vector<ParamDomain>& policy_domains() {
  static const std::vector<ParamDomain> domains = {
      {.name = "rotation", .kind = ParamDomain::Kind::choice,
       .help = "policy: rotate channel groups before quantizing and back after (hadamard = normalized "
               "Walsh-Hadamard, as llama.cpp does for quantized caches)",
       .default_value = "none", .choices = {"none", "hadamard"}},
      {.name = "rotation_group", .kind = ParamDomain::Kind::integer,
       .help = "policy: channels per rotation group (power of two); unset = llama.cpp's choice: K the largest "
               "power of two >= 64 dividing head_dim, V 64",
       .min = 2, .max = 4096, .power_of_two = true, .examples = {"64", "128"}},
  };
  return domains;
}

CachePolicy policy_from_values(const std::vector<std::pair<std::string, std::string>>& values) {
  CachePolicy p;
  for (const auto& [key, value] : values) {
    if (key == "rotation") p.rotation = value == "hadamard" ? Rotation::hadamard : Rotation::none;
    if (key == "rotation_group") p.rotation_group = std::stoll(value);
  }
  if (p.rotation == Rotation::none && p.rotation_group > 0) {
    throw InputError("'rotation_group' needs rotation=hadamard");
  }
  return p;
}

std::string policy_spec(const CachePolicy& policy) {
  std::string out;
  if (policy.rotation == Rotation::hadamard) out += ",rotation=hadamard";
  if (policy.rotation_group > 0) out += ",rotation_group=" + std::to_string(policy.rotation_group);
  return out;
}

SchemePtr apply_policy(SchemePtr inner, const CachePolicy& policy) {
  if (policy.is_identity()) return inner;
  return std::make_shared<RotatedScheme>(std::move(inner), policy);
}

int64_t llama_cpp_rotation_group(Role role, int64_t head_dim) {
  if (role == Role::value) return head_dim % 64 == 0 ? 64 : 0;
  int64_t best = 0;
  for (int64_t g = 64; g <= head_dim; g *= 2) {
    if (head_dim % g == 0) best = g;
  }
  return best;
}

}  // namespace kvtune
