// evaluate() in a child process (evaluator.h, isolation.h) and the byte form of its result.
#include <cstring>
#include <set>
#include <stdexcept>

#include "kvtune/error.h"
#include "kvtune/evaluator.h"

namespace kvtune {
namespace {

// Host-endian, native-width: the bytes never leave the machine (parent and child are one binary).
class Writer {
 public:
  template <class T>
  void put(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    out_ += s;
  }
  template <class T>
  void put_vector(const std::vector<T>& v) {
    put<uint64_t>(v.size());
    if (!v.empty()) out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  std::string get_string() {
    const uint64_t n = get<uint64_t>();
    return std::string(take(n), n);
  }
  template <class T>
  std::vector<T> get_vector() {
    const uint64_t n = get<uint64_t>();
    if (n > in_.size() / sizeof(T)) throw std::runtime_error("evaluation result: bad vector length");
    std::vector<T> v(n);
    const char* bytes = take(n * sizeof(T));
    if (n > 0) std::memcpy(v.data(), bytes, n * sizeof(T));  // an empty vector's data() may be null
    return v;
  }
  bool done() const { return in_.empty(); }

 private:
  const char* take(uint64_t n) {
    if (n > in_.size()) throw std::runtime_error("evaluation result: truncated");
    const char* p = in_.data();
    in_.remove_prefix(n);
    return p;
  }
  std::string_view in_;
};

constexpr uint32_t kMagic = 0x4b564552;  // "KVER"

// The plugin schemes of the plan, for the message of a child that died.
std::string plugin_schemes(const EvalPlan& plan) {
  std::set<std::string> named;
  std::vector<std::string> items;
  for (const auto* list : {&plan.k_schemes, &plan.v_schemes}) {
    for (const SchemePtr& s : *list) {
      const SchemeTraits t = s->traits();
      if (!t.from_plugin) continue;
      std::string item = "'" + s->spec() + "'";
      if (!t.plugin_origin.empty()) item += " (from " + t.plugin_origin + ")";
      if (named.insert(item).second) items.push_back(item);
    }
  }
  if (items.empty()) return "the evaluation";
  return (items.size() == 1 ? "plugin scheme " : "one of the plugin schemes ") + join(items);
}

}  // namespace

bool plan_uses_plugins(const EvalPlan& plan) {
  for (const auto* list : {&plan.k_schemes, &plan.v_schemes}) {
    for (const SchemePtr& s : *list) {
      if (s->traits().from_plugin) return true;
    }
  }
  return false;
}

std::string encode_eval_result(const EvalResult& r) {
  Writer w;
  w.put(kMagic);
  w.put<int64_t>(r.cases);
  w.put<int64_t>(r.queries_per_case);
  w.put<int64_t>(r.tokens);
  w.put<int64_t>(r.head_dim);
  w.put_string(r.backend);
  w.put<uint64_t>(r.pairs.size());
  for (const PairResult& p : r.pairs) {
    w.put_string(p.name);
    w.put(p.k_bits);
    w.put(p.v_bits);
    for (const std::vector<double>& s : p.samples) w.put_vector(s);
    for (const std::vector<size_t>& s : p.case_sizes) w.put_vector(s);
    w.put<uint64_t>(p.needle_depths.size());
    for (const DepthSamples& d : p.needle_depths) {
      w.put(d.depth);
      w.put_vector(d.hit);
      w.put_vector(d.mass_ratio);
      w.put_vector(d.case_sizes);
    }
    w.put_vector(p.kernel_vs_sim);
    w.put_vector(p.kernel_case_sizes);
  }
  return w.take();
}

EvalResult decode_eval_result(std::string_view bytes, const EvalPlan& plan) {
  Reader in(bytes);
  if (in.get<uint32_t>() != kMagic) throw std::runtime_error("evaluation result: not an encoded EvalResult");
  EvalResult r;
  r.cases = in.get<int64_t>();
  r.queries_per_case = in.get<int64_t>();
  r.tokens = in.get<int64_t>();
  r.head_dim = in.get<int64_t>();
  r.backend = in.get_string();
  r.precision = plan.precision;  // the child ran this plan
  const uint64_t n = in.get<uint64_t>();
  if (n != plan.pairs.size()) {
    throw std::runtime_error("evaluation result: " + std::to_string(n) + " pairs for a plan of " +
                             std::to_string(plan.pairs.size()));
  }
  r.pairs.resize(n);
  for (size_t i = 0; i < n; ++i) {
    PairResult& p = r.pairs[i];
    p.name = in.get_string();
    p.k = plan.k_schemes.at(plan.pairs[i].k);
    p.v = plan.v_schemes.at(plan.pairs[i].v);
    p.k_bits = in.get<double>();
    p.v_bits = in.get<double>();
    for (std::vector<double>& s : p.samples) s = in.get_vector<double>();
    for (std::vector<size_t>& s : p.case_sizes) s = in.get_vector<size_t>();
    const uint64_t depths = in.get<uint64_t>();
    for (uint64_t d = 0; d < depths; ++d) {
      DepthSamples ds;
      ds.depth = in.get<double>();
      ds.hit = in.get_vector<double>();
      ds.mass_ratio = in.get_vector<double>();
      ds.case_sizes = in.get_vector<size_t>();
      p.needle_depths.push_back(std::move(ds));
    }
    p.kernel_vs_sim = in.get_vector<double>();
    p.kernel_case_sizes = in.get_vector<size_t>();
  }
  if (!in.done()) throw std::runtime_error("evaluation result: trailing bytes");
  return r;
}

EvalResult evaluate_isolated(const EvalPlan& plan, size_t case_count, const CaseSource& source, int threads,
                             const IsolationOptions& options) {
  const SharedCaseSource shared = [&](size_t i) { return std::make_shared<const Case>(source(i)); };
  return evaluate_isolated(plan, case_count, shared, threads, options);
}

EvalResult evaluate_isolated(const EvalPlan& plan, size_t case_count, const SharedCaseSource& source,
                             int /*threads*/, const IsolationOptions& options) {
  if (plan.backend && plan.backend->name() != "cpu") {
    throw InputError(plugin_schemes(plan) + ": plugin schemes are evaluated in a child process, which cannot use the " +
                     plan.backend->name() + " backend (a GPU context does not survive fork); use the cpu backend");
  }
  const std::string bytes = run_isolated_or_throw(
      [&] { return encode_eval_result(evaluate(plan, case_count, source, 1)); }, plugin_schemes(plan), options);
  return decode_eval_result(bytes, plan);
}

}  // namespace kvtune
