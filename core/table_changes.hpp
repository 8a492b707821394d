#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/table_rows.hpp"
#include "core/table_store.hpp"

namespace actorps::detail {

/// Which rows of a table shard changed since the last mark, for delta
/// checkpoints: a bit per row (rows.changed) rather than a set of keys, so an
/// update costs one bit in a cache-resident array (1M rows: 128 KiB) and a
/// mark clears size() / 8 bytes; and the keys removed since the mark
/// (tombstones), in removal order. Nothing is kept before the first mark.
/// Not thread-safe.
class change_log {
public:
  bool tracking() const noexcept {
    return tracking_;
  }

  /// Starts a new change set (the first call starts rows.changed).
  void mark(table_rows& rows);

  /// `key` lost its row.
  void removed(uint64_t key) {
    if (tracking_)
      tombstones_.push_back(key);
  }

  /// The rows whose bit is set (every row before the first mark).
  table_store::contents changed_rows(const table_rows& rows) const;

  /// The tombstones whose keys hold no row now, each once.
  std::vector<uint64_t> removed_keys(const table_rows& rows) const;

  size_t memory_bytes() const noexcept {
    return tombstones_.capacity() * sizeof(uint64_t);
  }

private:
  bool tracking_ = false;
  std::vector<uint64_t> tombstones_;
};

/// Every row, in row order, in the layout of table_store::export_rows().
table_store::contents export_all_rows(const table_rows& rows);

/// Checks rows from outside (a checkpoint) against a table: value and slot
/// sizes against dim and `slot_count`, step counts, repeated keys, keys
/// outside the vocabulary, at most max_table_rows rows.
/// @returns key -> position in `c` (an index for the rows as given).
/// @throws std::invalid_argument "table NAME: ..." on the first problem.
absl::flat_hash_map<uint64_t, uint32_t>
check_table_contents(const table_shard_def& def, size_t slot_count,
                     const table_store::contents& c);

} // namespace actorps::detail
