#include "kvtune/rope.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <numbers>
#include <stdexcept>
#include <vector>

#include "kvtune/error.h"

namespace kvtune {
namespace {

// The cos and sin of every angle sign * p * theta^(-2i/D) for positions p < rows and pairs i < D/2,
// computed as apply_rope computes each one, so a rotation through the table has the same bits.
// Every case of a workload rotates its keys at positions 0..T-1 (and its calibration draws, and
// rope_stage=pre each quantization of them), and the sines and cosines took most of the time.
struct AngleTable {
  double theta;
  RopeScaling scaling;
  int64_t head_dim;
  bool inverse;
  int64_t rows;
  std::vector<double> cos, sin;
};

// At most 2^21 entries a table (16 MiB each of cos and sin: 32 768 positions at D = 128); rows
// beyond it compute their angles directly. A few tables are kept, the newest first.
constexpr int64_t kMaxTableEntries = int64_t(1) << 21;
constexpr size_t kTablesKept = 4;

double angle(bool inverse, int64_t position, double inv_freq) {
  const double sign = inverse ? -1.0 : 1.0;
  return sign * double(position) * inv_freq;
}

std::shared_ptr<const AngleTable> make_table(const RopeConfig& rope, int64_t d, bool inverse, int64_t rows) {
  auto table = std::make_shared<AngleTable>(AngleTable{rope.theta, rope.scaling, d, inverse, rows, {}, {}});
  const std::vector<double> inv_freq = rope_inverse_frequencies(rope, d);
  const int64_t half = d / 2;
  table->cos.resize(static_cast<size_t>(rows * half));
  table->sin.resize(static_cast<size_t>(rows * half));
  for (int64_t p = 0; p < rows; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double a = angle(inverse, p, inv_freq[i]);
      table->cos[p * half + i] = std::cos(a);
      table->sin[p * half + i] = std::sin(a);
    }
  }
  return table;
}

// The table for positions below `needed`, as far as one is kept (a shorter one, or none), for a
// call that rotates `rows` rows. A call grows the table (twice as far as before at least, up to
// the size limit) where it rotates 64 rows or more and either a quarter of the positions below its
// last, or positions below twice the table's end: a few rows do not pay for a table of many, and a
// caller that walks the positions a block at a time (add_recency in workload.cpp) builds log2(T)
// tables, not one per block. Where another thread holds the tables, none: the caller then
// computes its angles itself, with the same bits, so no thread waits for another's table, and a
// child process forked while some thread held the lock (isolation.cpp) never blocks on it.
std::shared_ptr<const AngleTable> angle_table(const RopeConfig& rope, int64_t d, bool inverse, int64_t needed,
                                              int64_t rows) {
  static std::mutex mutex;
  // Never destroyed: a thread may still rotate rows while the program exits.
  static auto* const tables = new std::vector<std::shared_ptr<const AngleTable>>();
  const int64_t limit = kMaxTableEntries / (d / 2);
  needed = std::min(needed, limit);
  const std::unique_lock<std::mutex> lock(mutex, std::try_to_lock);
  if (!lock.owns_lock()) return nullptr;
  const auto same = std::find_if(tables->begin(), tables->end(), [&](const auto& t) {
    return t->theta == rope.theta && t->scaling == rope.scaling && t->head_dim == d && t->inverse == inverse;
  });
  const std::shared_ptr<const AngleTable> kept = same != tables->end() ? *same : nullptr;
  if (kept != nullptr && kept->rows >= needed) return kept;
  const int64_t kept_rows = kept != nullptr ? kept->rows : 0;
  if (rows < 64 || (4 * rows < needed && 2 * kept_rows < needed)) return kept;
  if (kept != nullptr) tables->erase(same);
  if (tables->size() == kTablesKept) tables->pop_back();
  tables->insert(tables->begin(), make_table(rope, d, inverse, std::min(limit, std::max(needed, 2 * kept_rows))));
  return tables->front();
}

}  // namespace

const char* rope_scaling_name(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::linear: return "linear";
    case RopeScalingType::llama3: return "llama3";
    case RopeScalingType::none: break;
  }
  return "default";
}

std::string rope_scaling_problem(const RopeScaling& s) {
  const std::string who = std::string("rope_scaling '") + rope_scaling_name(s.type) + "'";
  // A factor below 1 would shorten the wavelengths: no model's config does that.
  if (s.type != RopeScalingType::none && !(s.factor >= 1.0 && s.factor <= 1e6)) {
    return who + ": 'factor' must be in [1, 1e6]";
  }
  if (s.type != RopeScalingType::llama3) return {};
  if (!(s.low_freq_factor > 0.0 && s.high_freq_factor > s.low_freq_factor && s.high_freq_factor <= 1e6)) {
    return who + ": needs 0 < 'low_freq_factor' < 'high_freq_factor' <= 1e6";
  }
  // The bound of a context anywhere in kvtune (a preset's max_context): 2^40 tokens.
  if (!(s.original_max_position >= 1.0 && s.original_max_position <= 1099511627776.0)) {
    return who + ": 'original_max_position_embeddings' must be in [1, 2^40]";
  }
  return {};
}

std::vector<double> rope_inverse_frequencies(const RopeConfig& rope, int64_t d) {
  std::vector<double> inv_freq(static_cast<size_t>(d / 2));
  for (int64_t i = 0; i < d / 2; ++i) inv_freq[i] = std::pow(rope.theta, -2.0 * double(i) / double(d));
  const RopeScaling& s = rope.scaling;
  if (s.type == RopeScalingType::linear) {
    for (double& f : inv_freq) f /= s.factor;
  } else if (s.type == RopeScalingType::llama3) {
    // _compute_llama3_parameters: wavelengths shorter than original / high_freq_factor are kept,
    // those longer than original / low_freq_factor divided by factor, and the ones between
    // interpolated by how many times they fit into the original context.
    const double low_wavelen = s.original_max_position / s.low_freq_factor;
    const double high_wavelen = s.original_max_position / s.high_freq_factor;
    for (double& f : inv_freq) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth =
            (s.original_max_position / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
  }
  return inv_freq;
}

void apply_rope(MatrixView x, std::span<const int64_t> positions, const RopeConfig& rope, bool inverse) {
  if (!rope.enabled) return;
  const int64_t d = x.cols;
  if (d % 2 != 0) throw InputError("RoPE needs an even head_dim, got " + std::to_string(d));
  if (static_cast<int64_t>(positions.size()) < x.rows) {
    throw std::invalid_argument("apply_rope: " + std::to_string(x.rows) + " rows but " +
                                std::to_string(positions.size()) + " positions");
  }
  if (x.rows == 0 || d == 0) return;
  const int64_t half = d / 2;
  const std::vector<double> inv_freq = rope_inverse_frequencies(rope, d);
  const int64_t last = *std::max_element(positions.begin(), positions.begin() + x.rows);
  const auto table = last >= 0 ? angle_table(rope, d, inverse, std::min(last, kMaxTableEntries) + 1, x.rows) : nullptr;
  const int64_t a_step = rope.convention == RopeConvention::rotate_half ? 1 : 2;
  const int64_t b_offset = rope.convention == RopeConvention::rotate_half ? half : 1;
  for (int64_t r = 0; r < x.rows; ++r) {
    float* row = x.row(r);
    const int64_t p = positions[r];
    const bool tabled = table != nullptr && p >= 0 && p < table->rows;
    for (int64_t i = 0; i < half; ++i) {
      double c, s;
      if (tabled) {
        c = table->cos[p * half + i];
        s = table->sin[p * half + i];
      } else {
        const double a = angle(inverse, p, inv_freq[i]);
        c = std::cos(a);
        s = std::sin(a);
      }
      const int64_t ia = a_step * i, ib = ia + b_offset;
      const double xa = row[ia], xb = row[ib];
      row[ia] = static_cast<float>(xa * c - xb * s);
      row[ib] = static_cast<float>(xb * c + xa * s);
    }
  }
}

}  // namespace kvtune
