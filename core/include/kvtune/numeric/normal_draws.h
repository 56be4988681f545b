// Standard normal draws in bulk, bit for bit those of std::normal_distribution<double>(0, 1) over
// std::mt19937_64 as libstdc++ makes them (Marsaglia's polar method on generate_canonical
// uniforms, the second value of each pair kept for the next call), four to five times faster:
// the synthetic workload draws millions per case, and the one-at-a-time draws were most of the
// time a case took to make. The tests compare every draw with libstdc++'s own.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace kvtune {

// MT19937-64 (Matsumoto and Nishimura; the parameters of std::mt19937_64, seeded the same way):
// std::mt19937_64's sequence for the same seed, its tempered outputs made a block of 312 at a
// time so that the loops vectorize. A UniformRandomBitGenerator, so the std distributions take it.
class Mt19937_64 {
 public:
  using result_type = uint64_t;
  static constexpr size_t kBlock = 312;

  explicit Mt19937_64(uint64_t seed);
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~result_type(0); }
  result_type operator()() {
    if (next_ == kBlock) refill();
    return out_[next_++];
  }

  // The outputs of this block not yet drawn; advance(n) draws n of them.
  size_t available() const { return kBlock - next_; }
  const uint64_t* upcoming() const { return out_.data() + next_; }
  void advance(size_t n) { next_ += n; }
  void refill();

 private:
  std::array<uint64_t, kBlock> state_;
  std::array<uint64_t, kBlock> out_;
  size_t next_ = kBlock;
};

// std::normal_distribution<double>{0.0, 1.0} with its own Mt19937_64. engine() is that engine:
// other distributions may draw from it in between, as they could from the std engine.
class NormalDraws {
 public:
  explicit NormalDraws(uint64_t seed) : engine_(seed) {}
  Mt19937_64& engine() { return engine_; }

  double next();
  // out[i] = float(scale * next()) for i < n, in one pass per engine block.
  void fill(float* out, size_t n, double scale);

 private:
  Mt19937_64 engine_;
  double saved_ = 0.0;
  bool saved_available_ = false;
};

}  // namespace kvtune
