#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace actorps {

/// The rows of one embedding table that one batch touches, deduplicated.
///
/// A model names the key of every lookup it makes in a batch
/// (`occurrences`, in an order of its choosing); the worker reduces them to
/// the unique `keys`, with `inverse[i]` the position in `keys` of
/// occurrence i (as `torch.unique(return_inverse=True)`). The worker pulls
/// the rows of `keys` into `rows`; the model reads row `inverse[i]` for
/// occurrence i and adds its gradient into row `inverse[i]` of `grad`, so
/// the gradients of duplicate keys are summed before they are pushed.
struct table_lookup {
  /// Index of the table in the model's variables().
  uint32_t variable = 0;
  /// Floats per row.
  uint64_t dim = 0;
  /// The key of every lookup the model makes, in its order.
  std::vector<uint64_t> occurrences;
  /// Unique keys, in order of first occurrence.
  std::vector<uint64_t> keys;
  /// Per occurrence: its key's position in `keys`.
  std::vector<uint32_t> inverse;
  /// keys.size() x dim: the pulled rows.
  std::vector<float> rows;
  /// keys.size() x dim: d(loss)/d(row), summed over occurrences.
  std::vector<float> grad;

  /// Fills keys and inverse from occurrences, and sizes rows (contents
  /// unspecified, to be pulled) and grad (zeroed) to keys.size() x dim.
  /// Sums nothing itself: the model adds into grad_of(). O(occurrences);
  /// its index is a thread-local buffer reused across calls (no allocation
  /// in steady state).
  /// @throws std::length_error with 2^32 - 1 occurrences or more.
  void deduplicate();

  const float* row_of(uint64_t occurrence) const {
    return rows.data() + inverse[occurrence] * dim;
  }

  float* grad_of(uint64_t occurrence) {
    return grad.data() + inverse[occurrence] * dim;
  }
};

/// The position of the first key in [keys, keys + n) that repeats an earlier
/// one, or n if all are unique. O(n), and allocation-free once warm (the
/// same reused index as table_lookup::deduplicate); a parameter server checks
/// every pushed table shard with it.
size_t first_duplicate(const uint64_t* keys, size_t n);

} // namespace actorps
