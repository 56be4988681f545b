#include "kvtune/scheme.h"

#include <vector>

#include "kvtune/error.h"

namespace kvtune {

const char* role_name(Role role) { return role == Role::key ? "k" : "v"; }

std::string role_problem(const Scheme& scheme, Role role) {
  const std::optional<Role> built_for = scheme.traits().role;
  if (!built_for || *built_for == role) return {};
  return "'" + scheme.spec() + "' is built for " + (*built_for == Role::key ? "keys" : "values") +
         " (role=" + role_name(*built_for) + ") and cannot store " + (role == Role::key ? "keys" : "values");
}

QuantContext rows_context(const QuantContext& ctx, int64_t first, int64_t rows) {
  QuantContext c = ctx;
  if (static_cast<int64_t>(ctx.positions.size()) >= first + rows) c.positions = ctx.positions.subspan(first, rows);
  return c;
}

std::string ParamDomain::describe() const {
  switch (kind) {
    case Kind::integer:
      return std::to_string(min) + ".." + std::to_string(max) + (power_of_two ? " (power of two)" : "");
    case Kind::choice:
      return join(choices, "|");
    case Kind::flag:
      return "flag";
    case Kind::real:
      return "number";
  }
  return "";
}

std::string Scheme::check_shape(int64_t tokens, int64_t head_dim) const {
  if (tokens < 1 || head_dim < 1) return "'" + spec() + "': a block needs at least one token and one channel";
  return {};
}

void Scheme::roundtrip(ConstMatrixView block, const QuantContext& ctx, MatrixView out) const {
  dequantize(quantize(block, ctx), ctx, out);
}

std::shared_ptr<const Scheme> Scheme::calibrate(ConstMatrixView, const QuantContext&) const {
  return shared_from_this();
}

void Scheme::logits(ConstMatrixView queries, std::span<const std::byte> packed, int64_t tokens,
                    const QuantContext& ctx, MatrixView logits) const {
  Matrix keys(tokens, queries.cols);
  dequantize(packed, ctx, keys);
  for (int64_t i = 0; i < queries.rows; ++i) {
    for (int64_t j = 0; j < tokens; ++j) {
      double dot = 0.0;
      for (int64_t c = 0; c < queries.cols; ++c) dot += double(queries(i, c)) * double(keys(j, c));
      logits(i, j) = static_cast<float>(dot);
    }
  }
}

void Scheme::require_shape(int64_t tokens, int64_t head_dim) const {
  const std::string why = check_shape(tokens, head_dim);
  if (!why.empty()) throw InputError(why);
}

void Scheme::require_packed(std::span<const std::byte> packed, int64_t tokens, int64_t head_dim) const {
  require_shape(tokens, head_dim);
  const size_t expected = footprint(tokens, head_dim);
  if (packed.size() != expected) {
    throw InputError("'" + spec() + "': packed block has " + std::to_string(packed.size()) + " bytes, expected " +
                     std::to_string(expected));
  }
}

double Scheme::bits_per_element(int64_t tokens, int64_t head_dim) const {
  if (tokens < 1 || head_dim < 1) return 0.0;
  return 8.0 * static_cast<double>(footprint(tokens, head_dim)) / static_cast<double>(tokens * head_dim);
}


SchemeTraits Scheme::traits() const {
  SchemeTraits t;
  t.estimates_logits = estimates_logits();
  t.device_format = device_format().has_value();
  return t;
}

}  // namespace kvtune
