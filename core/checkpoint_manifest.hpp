#pragma once

// The manifest of a checkpoint (layout in core/checkpoint.hpp): the rules a
// checkpoint_state must follow to be written, and manifest.json to and from
// a checkpoint_state.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint.hpp"
#include "core/checkpoint_shard_file.hpp"

namespace actorps::detail {

/// Throws std::invalid_argument ("write_checkpoint: WHAT") if `st` cannot be
/// written as a valid checkpoint (the rules of write_checkpoint, except
/// `keep`).
void validate_state(const checkpoint_state& st);

/// The name of the file of `st.shards[i]`: "shard-NNNN.bin" (at least four
/// digits).
std::string shard_file_name(size_t i);

/// The text of manifest.json for `st` with id `id`, whose shard i is in
/// `files[i]`.
/// @pre validate_state(st) passed; files.size() == st.shards.size().
std::string encode_manifest(const checkpoint_state& st,
                            const std::vector<shard_file_entry>& files,
                            uint64_t id);

/// A manifest read back: the state without the shards' arrays (their `slots`
/// sized, each slot empty) and the file of each shard.
struct decoded_manifest {
  /// The format version, checkpoint_oldest_version to
  /// checkpoint_format_version.
  uint32_t version = 0;
  checkpoint_state state;
  std::vector<shard_file_entry> files;
};

/// Parses and checks manifest.json: the format name, a supported version,
/// every field present with the right type and in range, shard files with
/// plain unique names, unique (variable, index), table shards with row_begin
/// and row_end 0, and each shard's "bytes" equal to the size its shape makes.
/// A version 1 manifest (no "kind") gives dense shards.
/// @param path  the manifest's path, for messages.
/// @throws input_error "PATH: WHAT".
decoded_manifest decode_manifest(const std::string& path,
                                 const std::string& text);

} // namespace actorps::detail
