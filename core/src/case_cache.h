// Cases kept in memory across a sweep's batches: each batch evaluates every case again, and
// generating a synthetic case (Gaussian draws, RoPE, needles) costs more than evaluating a batch
// of points on it. A case is kept only while the kept ones fit the budget; past it, a case is
// made again each time it is asked for, as before.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "kvtune/workload.h"

namespace kvtune {

class CaseCache {
 public:
  // `budget_bytes`: the most the kept cases may hold (their K, V, query and calibration floats).
  CaseCache(size_t count, size_t budget_bytes);

  // Case `index`, made by `make` the first time (concurrent calls for different indices run in
  // parallel; for the same index, one makes it and the others wait). No copy: a kept case is shared.
  std::shared_ptr<const Case> get(size_t index, const std::function<Case()>& make);

  // Half the machine's memory, at most 4 GiB.
  static size_t default_budget();

 private:
  struct Slot {
    std::mutex lock;
    std::shared_ptr<const Case> kept;
  };
  std::unique_ptr<Slot[]> slots_;
  size_t count_;
  size_t budget_;
  std::atomic<size_t> used_{0};
};

}  // namespace kvtune
