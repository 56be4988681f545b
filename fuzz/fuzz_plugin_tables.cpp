// A plugin's family table (plugin_family, the loader's check of what describe() returned): the
// family's name, its parameter domains (struct sizes, kinds, bounds, choices, examples), then a
// spec parsed against the accepted domains. The bytes choose every field; create() refuses, as a
// plugin's may, so the host's handling of a refusal is exercised too.
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "kvtune/plugin_abi.h"
#include "kvtune/plugin_loader.h"
#include "kvtune/registry.h"

namespace {

// The input as a stream of choices (libFuzzer's FuzzedDataProvider does the same, but is clang's
// header; this target also builds with GCC for the regression replays). Past the end: zeros.
class Choices {
 public:
  Choices(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  uint8_t byte() { return n_ == 0 ? 0 : (--n_, *p_++); }
  bool flag() { return byte() & 1; }
  size_t upto(size_t max) { return byte() % (max + 1); }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | byte();
    return v;
  }
  std::string string(size_t max) {
    std::string s(upto(max), '\0');
    for (char& c : s) c = char(byte());
    return s;
  }
  std::string rest() {
    std::string s(reinterpret_cast<const char*>(p_), n_);
    n_ = 0;
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

int32_t refuse(const kvtune_family*, const char* const*, const char* const*, size_t, kvtune_scheme** out, char* error,
               size_t error_size) {
  *out = nullptr;
  std::snprintf(error, error_size, "the fuzz family makes no schemes");
  return KVTUNE_STATUS_INVALID_INPUT;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Choices in(data, size);
  std::deque<std::string> strings;  // stable addresses for the tables' const char*
  auto text = [&](size_t max) -> const char* {
    if (in.flag()) return nullptr;
    strings.push_back(in.string(max));
    return strings.back().c_str();
  };
  std::deque<std::vector<const char*>> lists;
  auto list = [&](size_t& count) -> const char* const* {
    count = in.upto(4);
    if (in.flag()) return nullptr;  // a count with no array is a malformed table
    lists.emplace_back();
    for (size_t i = 0; i < count; ++i) lists.back().push_back(text(12));
    return lists.back().data();
  };
  std::vector<std::unique_ptr<kvtune_param_domain>> domains;
  std::vector<const kvtune_param_domain*> params;
  const size_t count = in.upto(6);
  for (size_t i = 0; i < count; ++i) {
    auto d = std::make_unique<kvtune_param_domain>();
    std::memset(d.get(), 0, sizeof *d);
    d->struct_size = in.flag() ? sizeof(kvtune_param_domain) : in.upto(128);
    d->name = text(12);
    d->kind = int32_t(in.upto(6)) - 1;
    d->help = text(20);
    d->default_value = text(8);
    d->min = int64_t(in.u64());
    d->max = int64_t(in.u64());
    d->choices = list(d->choice_count);
    d->examples = list(d->example_count);
    d->in_canonical = in.flag();
    d->power_of_two = in.flag();
    params.push_back(in.byte() < 250 ? d.get() : nullptr);
    domains.push_back(std::move(d));
  }
  kvtune_family family{};
  family.struct_size = in.byte() < 250 ? sizeof(kvtune_family) : in.upto(64);
  family.name = text(16);
  family.summary = text(20);
  family.params = in.byte() >= 250 && !params.empty() ? nullptr : params.data();
  family.param_count = params.size();
  family.create = in.byte() < 250 ? refuse : nullptr;
  const std::string spec = in.rest();
  kvtune::fuzz::expect_only_input_errors([&] {
    kvtune::Registry registry;
    registry.add(kvtune::plugin_family(&family, "fuzz.so", 0, "fuzz"));
    registry.make(spec);
  });
  return 0;
}
