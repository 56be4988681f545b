// Running code in a child process (kvtune/isolation.h) and evaluate_isolated (evaluator.h):
// whatever the child does — return, throw, crash, exit, hang — the parent gets a structured answer
// and goes on. The crashing plugins are tests/plugins/c_plugin.c built with TEST_CRASH.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "kvtune/error.h"
#include "kvtune/evaluator.h"
#include "kvtune/isolation.h"
#include "kvtune/plugin_loader.h"
#include "kvtune/scenario.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::absolute;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(Isolation, ReturnsTheChildsBytes) {
  const std::string bytes("a\0b\xff", 4);
  const IsolatedResult r = run_isolated([&] { return bytes; });
  ASSERT_EQ(r.status, IsolatedResult::Status::ok) << r.failure.describe();
  EXPECT_EQ(r.payload, bytes);
  // More than a pipe holds: the parent reads while the child writes.
  const IsolatedResult big = run_isolated([] { return std::string(20 << 20, 'x'); });
  ASSERT_EQ(big.status, IsolatedResult::Status::ok);
  EXPECT_EQ(big.payload.size(), size_t{20 << 20});
}

TEST(Isolation, ExceptionsComeBackByKind) {
  const IsolatedResult input = run_isolated([]() -> std::string { throw InputError("bad value 'x'"); });
  EXPECT_EQ(input.status, IsolatedResult::Status::input_error);
  EXPECT_EQ(input.payload, "bad value 'x'");
  const IsolatedResult bug = run_isolated([]() -> std::string { throw std::logic_error("a bug"); });
  EXPECT_EQ(bug.status, IsolatedResult::Status::exception);
  EXPECT_EQ(bug.payload, "a bug");
}

TEST(Isolation, ASignalExitOrHangIsAStructuredFailure) {
  const IsolatedResult segv = run_isolated([]() -> std::string {
    std::raise(SIGSEGV);
    return "";
  });
  ASSERT_EQ(segv.status, IsolatedResult::Status::failed);
  EXPECT_EQ(segv.failure.kind, ChildFailure::Kind::signal);
  EXPECT_EQ(segv.failure.code, SIGSEGV);
  EXPECT_EQ(segv.failure.describe(), "crashed: SIGSEGV (Segmentation fault)");

  const IsolatedResult aborted = run_isolated([]() -> std::string { std::abort(); });
  EXPECT_EQ(aborted.failure.kind, ChildFailure::Kind::signal);
  EXPECT_THAT(aborted.failure.describe(), HasSubstr("SIGABRT"));

  const IsolatedResult exited = run_isolated([]() -> std::string { std::exit(3); });
  EXPECT_EQ(exited.failure.kind, ChildFailure::Kind::exit_status);
  EXPECT_EQ(exited.failure.code, 3);
  EXPECT_THAT(exited.failure.describe(), HasSubstr("exited with status 3"));

  const IsolatedResult quiet = run_isolated([]() -> std::string { ::_exit(0); });
  EXPECT_EQ(quiet.failure.kind, ChildFailure::Kind::no_result);
  EXPECT_THAT(quiet.failure.describe(), HasSubstr("without reporting a result"));

  const auto start = std::chrono::steady_clock::now();
  const IsolatedResult hung = run_isolated(
      []() -> std::string {
        for (;;) ::pause();
      },
      {0.3});
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(hung.failure.kind, ChildFailure::Kind::timeout);
  EXPECT_EQ(hung.failure.describe(), "timed out after 0.3 s (killed)");
  EXPECT_LT(waited, 10.0);
  EXPECT_GE(waited, 0.29);
}

// Several threads at once, and a child that isolates work of its own.
TEST(Isolation, ConcurrentAndNestedCallsEachGetTheirOwnAnswer) {
  std::vector<std::string> answers(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < answers.size(); ++t) {
    threads.emplace_back([&, t] {
      const IsolatedResult r = run_isolated([t] { return std::to_string(t * t); }, {30});
      answers[t] = r.status == IsolatedResult::Status::ok ? r.payload : r.failure.describe();
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t t = 0; t < answers.size(); ++t) EXPECT_EQ(answers[t], std::to_string(t * t));
  const IsolatedResult nested = run_isolated(
      [] {
        const IsolatedResult inner = run_isolated([]() -> std::string { std::abort(); }, {30});
        return "inner " + inner.failure.describe();
      },
      {30});
  ASSERT_EQ(nested.status, IsolatedResult::Status::ok) << nested.failure.describe();
  EXPECT_THAT(nested.payload, HasSubstr("inner crashed: SIGABRT"));
}

TEST(Isolation, OrThrowRebuildsTheExceptionAndNamesACrash) {
  EXPECT_EQ(run_isolated_or_throw([] { return std::string("ok"); }, "x"), "ok");
  try {
    run_isolated_or_throw([]() -> std::string { throw InputError("same message"); }, "x");
    ADD_FAILURE() << "no exception";
  } catch (const PluginFault&) {
    ADD_FAILURE() << "an InputError is not a fault";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "same message");
  }
  try {
    run_isolated_or_throw([]() -> std::string { throw std::out_of_range("bug"); }, "x");
    ADD_FAILURE() << "no exception";
  } catch (const InputError&) {
    ADD_FAILURE() << "a bug must not become an InputError";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "bug");
  }
  try {
    run_isolated_or_throw([]() -> std::string { std::abort(); }, "plugin scheme 'p'");
    ADD_FAILURE() << "no exception";
  } catch (const PluginFault& e) {
    const InputError& as_input = e;  // callers that catch InputError take it too
    EXPECT_THAT(std::string(as_input.what()), HasSubstr("plugin scheme 'p' crashed: SIGABRT"));
  }
}

WorkloadConfig small_workload() {
  WorkloadConfig cfg;
  cfg.tokens = 200;
  cfg.head_dim = 32;
  cfg.queries = 2;
  cfg.needles.depths = {0.25, 0.75};
  return cfg;
}

// Every field of every pair survives the trip through the child, and k/v are the plan's schemes.
TEST(EvaluateIsolated, GivesWhatEvaluateGives) {
  const WorkloadConfig cfg = small_workload();
  const EvalPlan plan = build_plan({{"a", "int:bits=4,axis=channel", "int:bits=4,axis=token", ""},
                                    {"b", "q8_0", "int:bits=2,axis=token", ""}},
                                   builtin_registry(), 8);
  const CaseSource source = [&](size_t i) { return generate_case(cfg, i); };
  const EvalResult direct = evaluate(plan, 3, source, 2);
  const EvalResult isolated = evaluate_isolated(plan, 3, source, 2);
  EXPECT_EQ(isolated.cases, direct.cases);
  EXPECT_EQ(isolated.queries_per_case, direct.queries_per_case);
  EXPECT_EQ(isolated.tokens, direct.tokens);
  EXPECT_EQ(isolated.head_dim, direct.head_dim);
  EXPECT_EQ(isolated.backend, direct.backend);
  ASSERT_EQ(isolated.pairs.size(), direct.pairs.size());
  for (size_t p = 0; p < direct.pairs.size(); ++p) {
    const PairResult &a = isolated.pairs[p], &b = direct.pairs[p];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.k, b.k);
    EXPECT_EQ(a.v, b.v);
    EXPECT_EQ(a.k_bits, b.k_bits);
    EXPECT_EQ(a.v_bits, b.v_bits);
    EXPECT_EQ(a.samples, b.samples);
    ASSERT_EQ(a.needle_depths.size(), 2u);
    for (size_t d = 0; d < 2; ++d) {
      EXPECT_EQ(a.needle_depths[d].depth, b.needle_depths[d].depth);
      EXPECT_EQ(a.needle_depths[d].hit, b.needle_depths[d].hit);
      EXPECT_EQ(a.needle_depths[d].mass_ratio, b.needle_depths[d].mass_ratio);
    }
    EXPECT_EQ(a.kernel_vs_sim, b.kernel_vs_sim);
    EXPECT_FALSE(a.samples[0].empty());
  }
  EvalResult with_kernel = direct;
  with_kernel.pairs[0].kernel_vs_sim = {0.5, 0.25};
  EXPECT_EQ(decode_eval_result(encode_eval_result(with_kernel), plan).pairs[0].kernel_vs_sim,
            (std::vector<double>{0.5, 0.25}));
  EXPECT_THROW(decode_eval_result(encode_eval_result(direct).substr(1), plan), std::runtime_error);
}

TEST(EvaluateIsolated, PlanUsesPluginsSeesThroughPolicyWrappers) {
  Registry r = builtin_registry();
  load_plugin(r, KVTUNE_TEST_C_PLUGIN, "--plugin");
  EXPECT_FALSE(plan_uses_plugins(build_plan({{"", "q8_0", "q4_0", ""}}, r, 8)));
  EXPECT_TRUE(plan_uses_plugins(build_plan({{"", "q8_0", "c_int8:rotation=hadamard", ""}}, r, 8)));
  const SchemeTraits t = r.make("c_int8:sink_tokens=2")->traits();
  EXPECT_TRUE(t.from_plugin);
  EXPECT_EQ(t.plugin_origin, "--plugin " + absolute(KVTUNE_TEST_C_PLUGIN));
}

// The message of what evaluate_isolated threw, or a test failure.
template <class E>
std::string thrown(const EvalPlan& plan) {
  const WorkloadConfig cfg = small_workload();
  try {
    evaluate_isolated(plan, 2, [&](size_t i) { return generate_case(cfg, i); }, 1, {30});
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "nothing was thrown";
  return "";
}

TEST(EvaluateIsolated, ACrashingPluginIsAPluginFaultNamingIt) {
  for (const auto& [path, family, what] : {std::tuple{KVTUNE_TEST_SEGFAULT, "c_segv", "crashed: SIGSEGV"},
                                           std::tuple{KVTUNE_TEST_ABORT, "c_abort", "crashed: SIGABRT"},
                                           std::tuple{KVTUNE_TEST_EXIT, "c_exit", "exited with status 3"}}) {
    SCOPED_TRACE(family);
    Registry r = builtin_registry();
    load_plugin(r, path, "--plugin");
    const EvalPlan plan = build_plan({{"", std::string(family), "q8_0", ""}}, r, 8);
    EXPECT_THAT(thrown<PluginFault>(plan), HasSubstr("plugin scheme '" + std::string(family) + ":bits=8' (from --plugin " +
                                                      absolute(path) + ") " + what));
  }
}

TEST(EvaluateIsolated, AnEndlessPluginTimesOut) {
  Registry r = builtin_registry();
  load_plugin(r, KVTUNE_TEST_ENDLESS, "KVTUNE_PLUGIN_PATH");
  const EvalPlan plan = build_plan({{"", "q8_0", "c_endless:bits=5", ""}}, r, 8);
  const WorkloadConfig cfg = small_workload();
  try {
    evaluate_isolated(plan, 1, [&](size_t i) { return generate_case(cfg, i); }, 1, {0.5});
    ADD_FAILURE() << "nothing was thrown";
  } catch (const PluginFault& e) {
    EXPECT_THAT(std::string(e.what()), AllOf(HasSubstr("plugin scheme 'c_endless:bits=5' (from KVTUNE_PLUGIN_PATH "),
                                             HasSubstr("timed out after 0.5 s")));
  }
}

TEST(EvaluateIsolated, AnInputErrorInTheChildIsTheSameInputError) {
  Registry r = builtin_registry();
  load_plugin(r, KVTUNE_TEST_FAILING);
  const EvalPlan plan = build_plan({{"", "c_failing", "q8_0", ""}}, r, 8);
  const std::string message = thrown<InputError>(plan);
  EXPECT_THAT(message, HasSubstr("plugin " + absolute(KVTUNE_TEST_FAILING) +
                                 ", family 'c_failing': c_failing refuses every block (test plugin)"));
  EXPECT_THAT(message, Not(HasSubstr("crashed")));
}

}  // namespace
}  // namespace kvtune
