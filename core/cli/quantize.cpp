// kvtune quantize --scheme SPEC [--role k|v] --in A.npy --out B.npy [--packed-out FILE]
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "plugins.h"
#include "kvtune/error.h"
#include "kvtune/evaluator.h"
#include "kvtune/file_io.h"
#include "kvtune/npy.h"

namespace kvtune::cli {
namespace {

namespace fs = std::filesystem;

struct QuantizeOptions {
  std::string scheme, role, in, out, packed_out;  // role: "k", "v" or not given
};

int run(const QuantizeOptions& o) {
  const SchemePtr scheme = command_registry().make(o.scheme);
  // Refuse unwritable outputs before any work, so nothing is half-written.
  require_writable(o.out);
  require_not_an_input(o.out, {o.in}, "--out");
  if (!o.packed_out.empty()) require_writable(o.packed_out);
  require_not_an_input(o.packed_out, {o.in}, "--packed-out");
  if (!o.packed_out.empty() && same_file(o.packed_out, o.out)) {
    throw InputError("--packed-out " + o.packed_out + " and --out " + o.out + " name the same file; give two");
  }
  const NpyArray input = read_npy(o.in);
  const std::string why = scheme->check_shape(input.values.rows(), input.values.cols());
  if (!why.empty()) throw InputError(o.in + ": " + why);
  // A scheme built for one role (its spec says which) takes that role unless --role names the other.
  const std::optional<Role> built_for = scheme->traits().role;
  const Role role = o.role.empty() ? built_for.value_or(Role::key) : o.role == "v" ? Role::value : Role::key;
  if (const std::string wrong = role_problem(*scheme, role); !wrong.empty()) {
    throw InputError("--role " + o.role + ": " + wrong);
  }
  const QuantContext ctx{role, {}, 0};
  const std::vector<std::byte> packed = scheme->quantize(input.values, ctx);
  Matrix restored(input.values.rows(), input.values.cols());
  scheme->dequantize(packed, ctx, restored);
  // The same rule as `simulate`: an output the scheme cannot represent is refused, not written.
  require_finite_roundtrip(input.values, restored, *scheme, ctx.role, o.in);
  const std::vector<std::byte> image = npy_image(restored, input.shape.size() == 1);
  // The packed bytes first: a device such as /dev/full fails there, before --out is touched; and
  // a packed file made here goes again if --out then cannot be written.
  const bool packed_existed = !o.packed_out.empty() && fs::exists(o.packed_out);
  if (!o.packed_out.empty()) write_file_atomic(o.packed_out, packed);
  try {
    write_file_atomic(o.out, image);
  } catch (...) {
    std::error_code ignored;
    if (!o.packed_out.empty() && !packed_existed) fs::remove(o.packed_out, ignored);
    throw;
  }
  std::cerr << scheme->spec() << ": " << input.values.rows() << " x " << input.values.cols() << ", "
            << packed.size() << " bytes packed ("
            << scheme->bits_per_element(input.values.rows(), input.values.cols()) << " bits/element)\n";
  return 0;
}

}  // namespace

Runner add_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  app.add_option("--scheme", o->scheme, "scheme spec, e.g. int:bits=4,axis=channel,group=32")->required();
  app.add_option("--role", o->role, "k or v (default: the role the scheme is built for, else k)")
      ->check(CLI::IsMember({"k", "v"}));
  app.add_option("--in", o->in, "input .npy [T, D] or [D]")->required();
  app.add_option("--out", o->out, "round-tripped float32 .npy")->required();
  app.add_option("--packed-out", o->packed_out, "raw packed bytes (exactly the scheme's footprint)");
  return [o] { return run(*o); };
}

}  // namespace kvtune::cli
