#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dataset.hpp"

namespace actorps {

// -- state --------------------------------------------------------------------

/// The most optimizer slots a shard may carry (Adam's two moments).
constexpr uint32_t checkpoint_max_slots = 2;

/// Version of the manifest and shard-file format that write_checkpoint writes.
/// read_checkpoint reads it, version 2 (full checkpoints with tables, no
/// deltas) and version 1 (dense shards only, before tables).
constexpr uint32_t checkpoint_format_version = 3;

/// One shard of one variable, held by parameter server `ps`: either rows
/// [row_begin, row_end) x cols of a dense variable, or the rows an embedding
/// table shard holds (`table` set: its keys, one row of `cols` floats per key,
/// and each row's own update count).
struct checkpoint_shard {
  /// Variable name; any text (it may contain '/'), valid UTF-8.
  std::string variable;
  /// Shard number within the variable; (variable, index) is unique.
  uint32_t index = 0;
  /// Whether this is a table shard (keys, steps) rather than a dense range.
  bool table = false;
  /// Dense: global first-axis rows [row_begin, row_end). Tables: both 0.
  uint64_t row_begin = 0;
  uint64_t row_end = 0;
  /// Floats per row (a table's dimension).
  uint64_t cols = 1;
  /// The parameter server that holds the shard.
  uint32_t ps = 0;
  /// Dense: (row_end - row_begin) * cols floats, row-major; element (r, c) is
  /// global row `row_begin + r`, column c. Table: keys.size() * cols floats,
  /// row i belonging to keys[i].
  std::vector<float> values;
  /// Optimizer slots (0 to checkpoint_max_slots), each laid out as `values`.
  std::vector<std::vector<float>> slots;
  /// Table only: the keys of the rows (unique), and per row the number of
  /// updates applied to it (lazy Adam's t). Both empty for a dense shard.
  std::vector<uint64_t> keys;
  std::vector<uint64_t> steps;
  /// Table only, in a delta checkpoint: the rows above are only those
  /// created or updated since the base, and `removed` the keys that left
  /// the shard since then (tombstones, each once, none of them in `keys`).
  /// A table shard without `delta` in a delta checkpoint replaces the
  /// base's rows whole (a server that could not give a delta).
  bool delta = false;
  std::vector<uint64_t> removed;
};

/// Everything a checkpoint holds: the shards and the progress of training.
struct checkpoint_state {
  /// Closures (training steps) finished in the whole job.
  uint64_t global_step = 0;
  /// Epochs completed.
  uint32_t epoch = 0;
  /// Closures finished in the epoch after `epoch`.
  uint64_t step_in_epoch = 0;
  /// Each worker's position in its data shard, by worker index.
  std::vector<data_position> workers;
  /// Each parameter server's clock, by parameter-server index.
  std::vector<uint64_t> ps_clocks;
  /// Each parameter server's optimizer step count (Adam's t), by index; as
  /// many entries as `ps_clocks`.
  std::vector<uint64_t> optimizer_steps;
  /// The job's fingerprint as named text fields (keys like "model",
  /// "variables", "partitioning", "optimizer", "consistency", "cluster"),
  /// stored verbatim and returned verbatim. Keys and values are valid UTF-8.
  std::map<std::string, std::string> job;
  /// The shards, in any order; read_checkpoint returns them in this order.
  std::vector<checkpoint_shard> shards;
  /// This checkpoint's identity: a nonzero random number that a delta names
  /// its base by (0 when writing: write_checkpoint draws one).
  uint64_t id = 0;
  /// A delta checkpoint: its table shards may be deltas (checkpoint_shard::
  /// delta) of the checkpoint `base` (a directory name in the same root,
  /// "ckpt-NNNNNNNNNN", full or delta itself) whose id is `base_id`. The
  /// dense shards and the progress are always whole.
  bool delta = false;
  std::string base;
  uint64_t base_id = 0;
};

// -- files --------------------------------------------------------------------

/// Writes `st` as the directory ROOT/ckpt-NNNNNNNNNN (`global_step`, at least
/// 10 digits, zero-padded) atomically, then keeps only the newest `keep`
/// complete checkpoints in ROOT, each with its deltas.
///
/// Steps: creates ROOT if missing (one level); writes every file into a fresh
/// sibling directory ROOT/.tmp-ckpt-...; fsyncs each file and that directory;
/// renames it into place (an existing checkpoint of the same step is swapped
/// out atomically and then removed); fsyncs ROOT. Then removes, best effort,
/// every ".tmp-" directory in ROOT (left by crashed writers) and every
/// complete checkpoint but the new one and the newest `keep` - 1 others (by
/// step; the new one is kept even when ROOT holds newer ones from an earlier
/// run). Retention counts full checkpoints: a full one kept keeps its
/// deltas, a full one removed takes its deltas along, and the base of a
/// kept delta is never removed (detail::prune_chains). A directory that
/// cannot be removed is logged as a warning and left there. One writer per ROOT at a time: a concurrent writer's temporary
/// directory would be removed.
///
/// A delta (`st.delta`) holds the dense shards whole and, per table shard,
/// the rows created or updated since its base and the keys removed since
/// (or the whole shard, not marked `delta`); its base must be a complete
/// checkpoint ROOT/`st.base` with id `st.base_id`, older than the delta.
///
/// Layout of the directory (format version 3):
/// - "shard-NNNN.bin" for `st.shards[NNNN]` (the position in `shards`, never
///   the variable name). With R rows (dense: row_end - row_begin; table:
///   keys.size()), C = cols, S = slots.size():
///   - a 16-byte header: 8 bytes "APSSHARD", uint32 format version (2),
///     uint32 number of arrays A = 1 + S for a dense shard, 3 + S for a table,
///     4 + S for a table delta;
///   - A uint64 element counts, one per array in the order below;
///   - the float arrays, R * C floats each: `values`, then each slot;
///   - a table only: two uint64 arrays of R each: `keys`, then `steps`;
///   - a table delta only: one uint64 array of its K removed keys.
///   Size: 16 + 8 * A + 4 * (1 + S) * R * C (+ 16 * R for a table, + 8 * K
///   for a delta). All integers little-endian, floats little-endian IEEE 754
///   binary32.
/// - "manifest.json", written last: {"format": "actorps-checkpoint",
///   "version": 3, "kind": "full" or "delta", "id": 16 lowercase hex digits,
///   "base": {"dir", "id"} (a delta only), "global_step", "epoch",
///   "step_in_epoch", "workers":
///   [{"epoch", "offset"}...], "ps_clocks", "optimizer_steps", "job": {...},
///   "shards": [{"variable", "index", "kind", "rows" (tables only),
///   "row_begin", "row_end", "cols", "ps", "slots", "file", "bytes",
///   "crc32", "removed" (table deltas only)}...]}, where "kind" is "dense",
///   "table" or "table_delta", "rows" a table's number of keys, "bytes" the
///   shard file's size and "crc32" its CRC-32 (zlib's) as 8 lowercase hex
///   digits. The CRC and the size cover the whole file, the keys and steps
///   included.
///
/// Version 2 differs in that it has no deltas (no top-level "kind", "id" or
/// "base"; every checkpoint is full). Version 1 has no tables either: no
/// "kind" in the manifest. Each writes its version there and in each shard
/// file's header.
///
/// A complete checkpoint is a directory named as above with a manifest.json.
///
/// @param keep  how many complete checkpoints to keep, >= 1 (the new one
///              counts).
/// @returns the path of the new checkpoint directory, ROOT/ckpt-NNNNNNNNNN.
/// @throws std::invalid_argument, before touching the disk, if `keep` is 0 or
///         `st` is inconsistent (a shard's values are not rows * cols floats,
///         a slot differs in size from its values, more than
///         checkpoint_max_slots slots, a duplicate (variable, index),
///         ps_clocks and optimizer_steps of different lengths, a string that
///         is not valid UTF-8; a dense shard with row_end < row_begin or with
///         keys or steps; a table shard with row_begin or row_end not 0,
///         keys.size() != steps.size(), or a key twice; a delta shard in a
///         full checkpoint, removed keys outside a delta shard; a delta
///         without a base, or whose base is not ROOT/`base` with `base_id`).
///         The check for a key twice sorts a copy of the keys unless they are
///         strictly increasing (8 bytes per key, once per table shard).
/// @throws runtime_failure naming the path and the system's reason on any I/O
///         error (disk full, permission, ROOT not a directory). The temporary
///         directory is removed and every checkpoint that existed before is
///         untouched, except when fsyncing ROOT after the rename fails: then
///         the new checkpoint is in place but may not survive a power loss.
/// @note Not thread-safe for the same ROOT; blocks on disk I/O.
std::string write_checkpoint(const std::string& root,
                             const checkpoint_state& st, uint32_t keep);

/// Reads the checkpoint in directory `dir` (as returned by write_checkpoint
/// or latest_checkpoint) as a whole state: for a delta, the chain it ends
/// (its full checkpoint, then every delta in order, found through each
/// manifest's base in the same root) replayed with table_store::apply_delta.
/// Every manifest of the chain is checked before a shard file is read, and
/// each directory as follows before anything is returned:
/// the manifest is valid JSON with format "actorps-checkpoint", version 1 or
/// 2, every field present with the right type and in range; each shard file
/// named in it exists, has the manifest's size and CRC-32, a well-formed
/// header of the manifest's version, and as many arrays and elements as the
/// shard's kind, rows, cols and slots say; a table shard has row_begin and
/// row_end 0, as many steps as keys, and no key twice; no two shards share a
/// file or a (variable, index). A version 1 checkpoint reads as dense shards.
///
/// Memory: the result plus a 1 MiB read buffer (each shard file is decoded
/// as it is read, once, front to back), and for a table whose keys are not
/// increasing a sorted copy of its keys (8 bytes per key) for the check.
/// @returns the state exactly as written (float bits included); for a delta,
///          the state the live servers had when it was written (table rows
///          in no particular order), `delta` false and `id` the delta's.
/// @throws input_error naming the offending file ("DIR/manifest.json" or the
///         shard file's full path) and what is wrong, e.g. "checksum mismatch
///         (expected 1a2b3c4d, got 5e6f7a8b)", "truncated: 1234 bytes,
///         manifest says 5678", "unsupported checkpoint version 7", "12 keys
///         but 13 steps", "duplicate key 42"; for a broken chain "DIR: a
///         broken chain of checkpoints: D is a delta of ckpt-N, which is
///         missing; nothing is restored from it" (or has another id, or is
///         newer). Nothing is returned in part.
checkpoint_state read_checkpoint(const std::string& dir);

/// Reads and verifies the one checkpoint directory `dir` as written: a delta
/// stays a delta (its base is not read). Errors as read_checkpoint.
checkpoint_state read_checkpoint_dir(const std::string& dir);

/// Makes sure checkpoints can be written into `root` before a job starts:
/// creates it with its missing parents (as TensorFlow's CheckpointManager
/// does) and checks that it is a directory this process can write into.
/// @throws input_error "checkpoint directory ROOT: cannot ...: REASON" (not
///         a directory, no permission, a read-only file system), so that a
///         job refuses at its start (exit 2) instead of failing at its
///         first checkpoint.
void prepare_checkpoint_root(const std::string& root);

/// Returns the newest complete checkpoint directory in `root` (highest step
/// in its name, "ROOT/ckpt-NNNNNNNNNN"; ".tmp-" directories and directories
/// without a manifest.json are ignored), or "" when there is none or `root`
/// does not exist. A delta counts only with its whole chain (every base
/// present with its id): a broken one is skipped, logged as a warning.
/// Reads manifests only: read_checkpoint verifies the shard files.
/// @throws input_error naming `root` if it exists but cannot be listed (not a
///         directory, no permission).
std::string latest_checkpoint(const std::string& root);

} // namespace actorps
