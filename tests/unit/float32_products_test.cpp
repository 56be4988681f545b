// The float32 products (Precision::float32) against the bounds kvtune/attention.h states: each
// logit and output element against its exact value, and every metric of the evaluator against the
// float64 reference, with the bound docs/sweep-file.md derives from the element bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>

#include "kvtune/attention.h"
#include "kvtune/evaluator.h"
#include "kvtune/numeric/multiversion.h"
#include "kvtune/scenario.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::random_matrix;

const double u32 = std::ldexp(1.0, -24), u64 = std::ldexp(1.0, -53), tiny = std::ldexp(1.0, -149);

// The stated logit bound of each path, as a multiple of scale · Σ_e |q_e k_e|.
double f32_logit_factor(int64_t d) { return double((d + 15) / 16 + 5) * u32; }
double f64_logit_factor(int64_t d) { return double((d + 7) / 8 + 4) * u64; }
// The stated output bound of the float32 path, as a multiple of Σ_j p_j |v_je| (kChain = 64).
constexpr double kOutputUnits = 66.0;

// Each logit within (⌈d/16⌉ + 5) · 2^-24 · scale · Σ|q_e k_e| of the exact sum (long double holds
// the products exactly), over head sizes with and without a tail and key counts with and without a
// partial tile of 16; and the path really is another one (some logit differs from float64's).
TEST(Float32Products, LogitsStayWithinTheirBound) {
  std::mt19937 rng(5);
  int64_t differing = 0;
  for (const int64_t d : {1, 3, 13, 16, 64, 100, 128, 131, 256}) {
    for (const int64_t t : {1, 15, 16, 37}) {
      const int64_t nq = 3;
      const Matrix q = random_matrix(nq, d, rng), k = random_matrix(t, d, rng, 4.0f);
      AttentionScores s32, s64;
      attention_scores(q, k, s32, Precision::float32);
      attention_scores(q, k, s64, Precision::float64);
      const double scale = 1.0 / std::sqrt(double(d));
      for (int64_t i = 0; i < nq; ++i) {
        for (int64_t j = 0; j < t; ++j) {
          long double exact = 0, magnitude = 0;
          for (int64_t e = 0; e < d; ++e) {
            const long double term = (long double)q(i, e) * (long double)k(j, e);
            exact += term;
            magnitude += std::fabs(term);
          }
          const double bound = f32_logit_factor(d) * double(magnitude) * scale + double(d + 16) * tiny;
          const double got = s32.logits[size_t(i * t + j)];
          ASSERT_LE(std::abs(got - double(exact) * scale), bound) << "d " << d << " t " << t << " [" << i << ", " << j << "]";
          differing += got != s64.logits[size_t(i * t + j)] ? 1 : 0;
        }
      }
    }
  }
  EXPECT_GT(differing, 100);
}

// A key's logits do not depend on where it falls in the tiles of 16 (the last, partial tile is
// padded): dropping the first key moves every key to another slot, and no logit moves.
TEST(Float32Products, LogitsDoNotDependOnTheTiling) {
  std::mt19937 rng(9);
  for (const int64_t d : {40, 128}) {
    const Matrix q = random_matrix(5, d, rng), k = random_matrix(70, d, rng, 3.0f);
    AttentionScores all, rest;
    attention_scores(q, k, all, Precision::float32);
    attention_scores(q, k.view().row_range(1, 69), rest, Precision::float32);
    for (int64_t i = 0; i < 5; ++i) {
      for (int64_t j = 0; j < 69; ++j) {
        ASSERT_EQ(rest.logits[size_t(i * 69 + j)], all.logits[size_t(i * 70 + j + 1)]) << d << ": " << i << ", " << j;
      }
    }
  }
}

// Nor on the queries beside it: on AVX-512 queries go four at a time (the fifth alone), and each
// query's logits on its own equal its logits among the five, bit for bit.
TEST(Float32Products, LogitsDoNotDependOnTheQueryGrouping) {
  std::mt19937 rng(10);
  for (const int64_t d : {40, 128}) {
    const Matrix q = random_matrix(5, d, rng), k = random_matrix(70, d, rng, 3.0f);
    AttentionScores all;
    attention_scores(q, k, all, Precision::float32);
    for (int64_t i = 0; i < 5; ++i) {
      AttentionScores one;
      attention_scores(q.view().row_range(i, 1), k, one, Precision::float32);
      for (int64_t j = 0; j < 70; ++j) {
        ASSERT_EQ(one.logits[size_t(j)], all.logits[size_t(i * 70 + j)]) << d << ": " << i << ", " << j;
      }
    }
  }
}

// Each output element within 66 · 2^-24 · Σ_j p_j |v_je| (+ 2^-149 per subnormal operation) of the
// exact sum, with probabilities spread from 1 down past float32's normal range, and with uniform
// probabilities over constant columns (the adversarial case: every addition rounds the same way, so
// a chain much longer than 64 tokens would leave the bound).
TEST(Float32Products, OutputsStayWithinTheirBound) {
  std::mt19937 rng(17);
  for (const bool uniform : {false, true}) {
    for (const int64_t d : {5, 64, 128, 131}) {
      for (const int64_t t : {1, 17, 300, 4099}) {
        Matrix q = random_matrix(4, d, rng), v = random_matrix(t, d, rng);
        // Keys that put logits from 0 down to about -120 (p below 2^-149 for the last ones).
        Matrix k = random_matrix(t, d, rng, 0.01f);
        for (int64_t j = 0; j < t; ++j) k(j, 0) += 120.0f * float(j) / float(t) * (q(0, 0) > 0 ? -1.0f : 1.0f);
        if (uniform) {
          q = Matrix(4, d, 0.0f);
          for (int64_t j = 0; j < t; ++j) {
            for (int64_t e = 0; e < d; ++e) v(j, e) = 0.1f + 0.01f * float(e);
          }
        }
        AttentionScores s;
        attention_scores(q, k, s);
        const std::vector<double> o = attention_output(s, v, Precision::float32);
        const std::vector<double> o64 = attention_output(s, v);
        bool differs = false;
        for (int64_t i = 0; i < 4; ++i) {
          for (int64_t e = 0; e < d; ++e) {
            long double exact = 0, magnitude = 0, plain = 0;
            for (int64_t j = 0; j < t; ++j) {
              const long double term = (long double)s.prob_row(i)[j] * (long double)v(j, e);
              exact += term;
              magnitude += std::fabs(term);
              plain += std::fabs((long double)v(j, e));
            }
            const double bound = kOutputUnits * u32 * double(magnitude) + tiny * (double(plain) + 2.0 * double(t));
            ASSERT_LE(std::abs(o[size_t(i * d + e)] - double(exact)), bound)
                << (uniform ? "uniform " : "") << "d " << d << " t " << t << " [" << i << ", " << e << "]";
            differs = differs || o[size_t(i * d + e)] != o64[size_t(i * d + e)];
          }
        }
        if (t > 16) {
          EXPECT_TRUE(differs) << "d " << d << " t " << t;
        }
      }
    }
  }
}

// Each output element is its float32 chains, bit for bit: per chain of 64 tokens a float32
// multiply-add chain from 0 over p rounded to float32, each chain's sum added in float64 in token
// order. With 9 rows (two groups of four, one alone) of scores made for float32 (probs32), stacked
// from two score sets, and with the float64 rows the evaluator would otherwise round: the same
// bits. Any other blocking of tokens or order of chains fails it. Each step fuses (one rounding)
// where the kernels run their AVX2 or AVX-512 clone; a build without clones runs baseline x86-64,
// which rounds the product first, except in the columns past the last 16 (std::fma everywhere).
TEST(Float32Products, OutputsAreTheirChainsBitForBit) {
  const bool vectors_fuse = kMultiversioned && __builtin_cpu_supports("fma");
  std::mt19937 rng(23);
  for (const int64_t d : {5, 40, 64, 128, 131}) {
    for (const int64_t t : {1, 63, 64, 65, 300}) {
      const Matrix q = random_matrix(9, d, rng), k = random_matrix(t, d, rng), v = random_matrix(t, d, rng);
      AttentionScores a, b;
      attention_scores(q.view().row_range(0, 5), k, a, Precision::float32);
      attention_scores(q.view().row_range(5, 4), k, b, Precision::float32);
      ASSERT_EQ(a.probs32.size(), a.probs.size());
      std::vector<const float*> rows32;
      std::vector<const double*> rows64;
      for (const AttentionScores* s : {&a, &b}) {
        for (int64_t i = 0; i < s->queries; ++i) rows32.push_back(s->prob32_row(i)), rows64.push_back(s->prob_row(i));
      }
      std::vector<double> stacked(9 * size_t(d)), from64(9 * size_t(d));
      attention_outputs(rows32, v, stacked.data());
      attention_outputs(rows64, v, from64.data(), Precision::float32);
      ASSERT_EQ(stacked, from64) << "d " << d << " t " << t;
      for (int64_t r = 0; r < 9; ++r) {
        for (int64_t e = 0; e < d; ++e) {
          double want = 0.0;
          for (int64_t c = 0; c < t; c += 64) {
            float chain = 0.0f;
            for (int64_t j = c; j < std::min(t, c + 64); ++j) {
              const float p = float(rows64[size_t(r)][j]);
              chain = vectors_fuse || e >= d - d % 16 ? std::fma(p, v(j, e), chain) : chain + p * v(j, e);
            }
            want += double(chain);
          }
          ASSERT_EQ(stacked[size_t(r * d + e)], want) << "d " << d << " t " << t << " [" << r << ", " << e << "]";
        }
      }
    }
  }
}

// Norm of a vector.
double norm(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return std::sqrt(s);
}

// The evaluator in float32 against float64, per sample, on the kind of case (outlier
// channels, needles, T not a multiple of 16), for key schemes from near-exact (f16) to coarse:
//   E_r, E_q = the largest combined logit bound (both paths) of a query's reference and quantized
//              logits;
//   max_logit_err within E_r + E_q, shift_logit_err within 2 (E_r + E_q);
//   attn_kl within (e^{2 E_r} - 1) Σ_j p_j |log p_j - log q_j| + 2 (E_r + E_q);
//   needle_mass_ratio within a factor e^{2 (E_r + E_q)};
//   rel_out_err within (|β_q| + |β_r| + rel |β_r|) / (|o_r| - |β_r|), β per element
//              [(e^{2E} - 1) + e^{2E} (66 u + (T + 1) 2^-53)] Σ_j p_j |v_je| + 2^-149 (Σ_j |v_je| + 2T);
//   top1_agree, topk_overlap and needle_hit equal (they can change only between probabilities
//              within a factor e^{4E}, which these cases do not have).
TEST(Float32Products, EveryMetricStaysWithinItsBoundOfTheFloat64One) {
  WorkloadConfig cfg;
  cfg.tokens = 1999;
  cfg.head_dim = 128;
  cfg.queries = 4;
  cfg.keys.outlier_channels = {7, 23, 88};
  cfg.keys.outlier_scale = 20.0;
  const std::vector<std::string> k_specs = {"f16", "int:bits=4,axis=channel", "q4_0"};
  const std::vector<std::string> v_specs = {"q8_0", "int:bits=3,axis=token"};
  std::vector<PairRequest> req;
  for (const std::string& k : k_specs) {
    for (const std::string& v : v_specs) req.push_back({"", k, v, ""});
  }
  EvalPlan plan64 = build_plan(req, builtin_registry(), 8);
  EvalPlan plan32 = build_plan(req, builtin_registry(), 8);
  plan32.precision = Precision::float32;
  const size_t cases = 3;
  auto source = [&](size_t i) { return generate_case(cfg, 70 + i); };
  const EvalResult r64 = evaluate(plan64, cases, source, 1);
  const EvalResult r32 = evaluate(plan32, cases, source, 2);
  ASSERT_EQ(r32.pairs.size(), req.size());

  const int64_t d = cfg.head_dim;
  const double scale = 1.0 / std::sqrt(double(d));
  const double logit_factor = f32_logit_factor(d) + f64_logit_factor(d);
  size_t differing = 0;
  double largest_e = 0;  // printed: the size of the bound on these keys
  for (size_t ci = 0; ci < cases; ++ci) {
    const Case c = source(ci);
    const int64_t t = c.keys.rows(), nq = c.queries.rows();
    // Per query: the largest combined logit bound against keys `k`.
    auto logit_bounds = [&](const Matrix& k) {
      std::vector<double> out(size_t(nq), 0.0);
      for (int64_t i = 0; i < nq; ++i) {
        for (int64_t j = 0; j < t; ++j) {
          double magnitude = 0;
          for (int64_t e = 0; e < d; ++e) magnitude += std::abs(double(c.queries(i, e)) * double(k(j, e)));
          out[size_t(i)] = std::max(out[size_t(i)], logit_factor * magnitude * scale + double(d + 16) * tiny);
        }
      }
      return out;
    };
    // Per element of the output: β as above.
    auto output_bounds = [&](const AttentionScores& s, const Matrix& v, const std::vector<double>& e_bound) {
      std::vector<double> beta(size_t(nq * d));
      for (int64_t i = 0; i < nq; ++i) {
        const double grow = std::exp(2.0 * e_bound[size_t(i)]);
        const double factor = (grow - 1.0) + grow * (kOutputUnits * u32 + double(t + 1) * u64);
        for (int64_t e = 0; e < d; ++e) {
          double weighted = 0, plain = 0;
          for (int64_t j = 0; j < t; ++j) {
            weighted += s.prob_row(i)[j] * std::abs(double(v(j, e)));
            plain += std::abs(double(v(j, e)));
          }
          beta[size_t(i * d + e)] = factor * weighted * 1.0001 + tiny * (plain + 2.0 * double(t));
        }
      }
      return beta;
    };
    const QuantContext kctx{Role::key, c.positions, c.seed, &c.rope};
    const QuantContext vctx{Role::value, c.positions, c.seed, &c.rope};
    const AttentionScores ref = attention_scores(c.queries, c.keys);
    const std::vector<double> e_ref = logit_bounds(c.keys);
    largest_e = std::max(largest_e, *std::max_element(e_ref.begin(), e_ref.end()));
    const std::vector<double> o_ref = attention_output(ref, c.values);
    const std::vector<double> beta_ref = output_bounds(ref, c.values, e_ref);

    for (size_t p = 0; p < req.size(); ++p) {
      Matrix kq(t, d), vq(t, d);
      builtin_registry().make(req[p].k)->roundtrip(c.keys, kctx, kq);
      builtin_registry().make(req[p].v)->roundtrip(c.values, vctx, vq);
      const AttentionScores sq = attention_scores(c.queries, kq);
      const std::vector<double> e_q = logit_bounds(kq);
      const std::vector<double> o_q = attention_output(sq, vq);
      const std::vector<double> beta_q = output_bounds(sq, vq, e_q);
      auto sample = [&](const EvalResult& r, Metric m, int64_t i) {
        return r.pairs[p].samples[size_t(m)][ci * size_t(nq) + size_t(i)];
      };
      for (int64_t i = 0; i < nq; ++i) {
        const std::string where = req[p].k + " / " + req[p].v + " case " + std::to_string(ci) + " query " + std::to_string(i);
        const double er = e_ref[size_t(i)], eq = e_q[size_t(i)];
        EXPECT_LE(std::abs(sample(r32, Metric::max_logit_err, i) - sample(r64, Metric::max_logit_err, i)), er + eq) << where;
        EXPECT_LE(std::abs(sample(r32, Metric::shift_logit_err, i) - sample(r64, Metric::shift_logit_err, i)),
                  2 * (er + eq))
            << where;
        double spread = 0;
        for (int64_t j = 0; j < t; ++j) {
          const double lr = ref.logit_row(i)[j] - ref.log_norm[size_t(i)], lq = sq.logit_row(i)[j] - sq.log_norm[size_t(i)];
          spread += ref.prob_row(i)[j] * std::abs(lr - lq);
        }
        EXPECT_LE(std::abs(sample(r32, Metric::attn_kl, i) - sample(r64, Metric::attn_kl, i)),
                  (std::exp(2 * er) - 1) * spread + 2 * (er + eq) + 1e-13)
            << where;
        for (Metric m : {Metric::top1_agree, Metric::topk_overlap}) {
          EXPECT_EQ(sample(r32, m, i), sample(r64, m, i)) << where << " " << metric_name(m);
        }
        // rel_out_err of this query from the element bounds.
        std::vector<double> bq(beta_q.begin() + i * d, beta_q.begin() + (i + 1) * d);
        std::vector<double> br(beta_ref.begin() + i * d, beta_ref.begin() + (i + 1) * d);
        std::vector<double> orow(o_ref.begin() + i * d, o_ref.begin() + (i + 1) * d);
        const double rel = sample(r64, Metric::rel_out_err, i);
        const double rel_bound = (norm(bq) + norm(br) + rel * norm(br)) / (norm(orow) - norm(br));
        EXPECT_LE(std::abs(sample(r32, Metric::rel_out_err, i) - rel), rel_bound) << where;
        differing += sample(r32, Metric::rel_out_err, i) != rel ? 1 : 0;
      }
      // Needle samples are per planted needle, in query order.
      const auto& hits32 = r32.pairs[p].samples[size_t(Metric::needle_hit)];
      const auto& hits64 = r64.pairs[p].samples[size_t(Metric::needle_hit)];
      EXPECT_EQ(hits32, hits64) << req[p].k << " / " << req[p].v;
      const auto& mass32 = r32.pairs[p].samples[size_t(Metric::needle_mass_ratio)];
      const auto& mass64 = r64.pairs[p].samples[size_t(Metric::needle_mass_ratio)];
      ASSERT_EQ(mass32.size(), mass64.size());
      const size_t per_case = c.needles.size(), first = ci * per_case;
      for (size_t n = 0; n < per_case; ++n) {
        const int64_t i = c.needles[n].query;
        const double bound = 2 * (e_ref[size_t(i)] + e_q[size_t(i)]) + 1e-13;
        EXPECT_LE(std::abs(std::log(mass32[first + n] / mass64[first + n])), bound) << req[p].k << " needle " << n;
      }
    }
  }
  EXPECT_GT(differing, 0u) << "the float32 path gave float64's bits everywhere";
  std::cout << "largest combined logit bound E of the reference keys: " << largest_e
            << "; f16 keys' mean max_logit_err: " << r64.pairs[0].summary(Metric::max_logit_err).mean << "\n";
}

}  // namespace
}  // namespace kvtune
