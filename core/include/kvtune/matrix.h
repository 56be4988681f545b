// Flat row-major float32 storage and non-owning views. Rows are tokens, columns are head-dim
// channels throughout kvtune ([T, D]); a single query is a [1, D] matrix.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <vector>

namespace kvtune {

struct ConstMatrixView {
  const float* data = nullptr;  // [rows, cols], row-major, contiguous
  int64_t rows = 0;
  int64_t cols = 0;

  int64_t size() const { return rows * cols; }
  const float* row(int64_t r) const { return data + r * cols; }
  float operator()(int64_t r, int64_t c) const { return data[r * cols + c]; }
  std::span<const float> span() const { return {data, static_cast<size_t>(size())}; }
  ConstMatrixView row_range(int64_t first, int64_t count) const {
    return {data + first * cols, count, cols};
  }
};

struct MatrixView {
  float* data = nullptr;  // [rows, cols], row-major, contiguous
  int64_t rows = 0;
  int64_t cols = 0;

  int64_t size() const { return rows * cols; }
  float* row(int64_t r) const { return data + r * cols; }
  float& operator()(int64_t r, int64_t c) const { return data[r * cols + c]; }
  std::span<float> span() const { return {data, static_cast<size_t>(size())}; }
  operator ConstMatrixView() const { return {data, rows, cols}; }
};

// Storage on 64-byte (cache-line) boundaries: a codec's 64-byte vector load or store then touches
// one line instead of two (malloc's 16-byte alignment split every one of them).
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, kAlign); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept { return true; }
};

class Matrix {
 public:
  Matrix() = default;
  Matrix(int64_t rows, int64_t cols, float fill = 0.0f)
      : rows_(rows), cols_(cols), data_(static_cast<size_t>(rows * cols), fill) {}

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t size() const { return rows_ * cols_; }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  float& operator()(int64_t r, int64_t c) { return data_[static_cast<size_t>(r * cols_ + c)]; }
  float operator()(int64_t r, int64_t c) const { return data_[static_cast<size_t>(r * cols_ + c)]; }
  float* row(int64_t r) { return data() + r * cols_; }
  const float* row(int64_t r) const { return data() + r * cols_; }

  MatrixView view() { return {data(), rows_, cols_}; }
  ConstMatrixView view() const { return {data(), rows_, cols_}; }
  operator MatrixView() { return view(); }
  operator ConstMatrixView() const { return view(); }

  bool operator==(const Matrix&) const = default;

 private:
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  std::vector<float, CacheLineAllocator<float>> data_;
};

inline Matrix copy_of(ConstMatrixView v) {
  Matrix m(v.rows, v.cols);
  std::copy(v.data, v.data + v.size(), m.data());
  return m;
}

}  // namespace kvtune
