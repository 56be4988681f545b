// The two fitting steps of the `kvquant` family, separate so tests/unit can check them by hand.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvtune::builtin::kvquant {

// Optimal 1-D k-means (least squares) of `values` into k clusters: the k centroids, ascending.
// Sorted 1-D data splits optimally into contiguous runs, so a dynamic programme over the sorted
// distinct values finds the global optimum (Wang & Song 2011, "Ckmeans.1d.dp: Optimal k-means
// Clustering in One Dimension by Dynamic Programming"); the split points are monotone, so each
// layer is filled by divide and conquer in O(n log n) (Grønlund et al. 2017, "Fast Exact k-Means,
// k-Medians and Bregman Divergence Clustering in 1D"). Deterministic, no initialisation. With
// pin_unit_ends the first and last centroids are fixed at 0 and 1 and k - 2 are fitted (values in
// [0, 1], k >= 2). Fewer distinct values than free centroids: each value is a centroid and the
// last one repeats. Empty input: every free centroid is 0.
std::vector<double> kmeans_1d(std::span<const float> values, int k, bool pin_unit_ends = false);

// Indices of the n entries of x[0], x[stride], ..., x[(len - 1) * stride] with the largest |x|
// (ties: the lower index first), ascending: the sparse outliers of one vector. The family ranks
// the f16 values it would store, so re-quantizing a round trip picks the same entries.
std::vector<int64_t> largest_magnitudes(const float* x, int64_t len, int64_t stride, int64_t n);

}  // namespace kvtune::builtin::kvquant
