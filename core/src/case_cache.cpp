#include "case_cache.h"

#include <unistd.h>

#include <algorithm>
#include <stdexcept>

namespace kvtune {
namespace {

size_t float_bytes(const Case& c) {
  const int64_t floats = c.keys.size() + c.values.size() + c.queries.size() + c.calibration.keys.size() +
                         c.calibration.values.size();
  return size_t(floats) * sizeof(float);
}

}  // namespace

CaseCache::CaseCache(size_t count, size_t budget_bytes)
    : slots_(std::make_unique<Slot[]>(count)), count_(count), budget_(budget_bytes) {}

std::shared_ptr<const Case> CaseCache::get(size_t index, const std::function<Case()>& make) {
  if (index >= count_) throw std::logic_error("CaseCache: case index out of range");
  Slot& slot = slots_[index];
  const std::lock_guard<std::mutex> guard(slot.lock);
  if (slot.kept) return slot.kept;
  auto c = std::make_shared<const Case>(make());
  const size_t bytes = float_bytes(*c);
  size_t used = used_.load();
  while (used + bytes <= budget_) {
    if (used_.compare_exchange_weak(used, used + bytes)) {
      slot.kept = c;
      break;
    }
  }
  return c;
}

size_t CaseCache::default_budget() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const size_t half = pages > 0 && page > 0 ? size_t(pages) * size_t(page) / 2 : 0;
  return std::min<size_t>(half, size_t(4) << 30);
}

}  // namespace kvtune
