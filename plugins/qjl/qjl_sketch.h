// The QJL projection and its estimator constant (Zandieh, Daliri, Han 2024, "QJL: 1-Bit Quantized
// JL Transform for KV Cache Quantization with Zero Overhead", arXiv:2406.03482, Def. 1 and
// Lemma 3.2): for S with i.i.d. N(0, 1) entries, E[ sqrt(pi/2) / m * ||k|| * <S q, sign(S k)> ] = <q, k>.
#pragma once

#include <cstdint>
#include <vector>

namespace kvtune::builtin::qjl {

// S, [m, d] row-major: i.i.d. N(0, 1) (gaussian, the paper's), or sqrt(d) times the first m rows
// of a Haar orthogonal matrix (orthogonal, m <= d; rows uniform on the sphere of radius sqrt(d)).
std::vector<double> projection(int64_t m, int64_t d, uint64_t seed, bool orthogonal);

// c such that c * ||k|| * <S q, sign(S k)> is unbiased for <q, k>: sqrt(pi/2) / m for gaussian;
// for orthogonal rows s (uniform on the sphere of radius sqrt(d)), E[<s,q> sign(<s,k>)] =
// sqrt(d) E|u_1| <q,k>/||k|| with E|u_1| = Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)), so
// c = 1 / (m sqrt(d) E|u_1|) (-> sqrt(pi/2) / m as d grows).
double estimator_constant(int64_t m, int64_t d, bool orthogonal);

}  // namespace kvtune::builtin::qjl
