#include "core/checkpoint.hpp"

#include <cerrno>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "core/checkpoint_chain.hpp"
#include "core/checkpoint_files.hpp"
#include "core/checkpoint_manifest.hpp"
#include "core/checkpoint_shard_file.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

// The layers: checkpoint_files (directories, durability, removal),
// checkpoint_shard_file (the binary codec of one shard),
// checkpoint_manifest (manifest.json and the rules of a valid state) and
// checkpoint_chain (full checkpoints and their deltas: replay, retention).
// This file puts them in order.

namespace actorps {

std::string write_checkpoint(const std::string& root,
                             const checkpoint_state& st, uint32_t keep) {
  using namespace detail;
  if (keep == 0)
    throw std::invalid_argument("write_checkpoint: keep must be at least 1");
  validate_state(st);
  auto final_name = checkpoint_dir_name(st.global_step);
  auto final_path = join_path(root, final_name);
  if (st.delta) {
    // A delta is only written onto its base, never in its place.
    auto base = join_path(root, st.base);
    uint64_t id = 0;
    try {
      id = resolve_chain(base).back().manifest.state.id;
    } catch (const std::exception& e) {
      throw std::invalid_argument(fmt::format(
        "write_checkpoint: the base of the delta, {}, does not read: {}", base,
        e.what()));
    }
    if (id != st.base_id || st.base == final_name)
      throw std::invalid_argument(fmt::format(
        "write_checkpoint: the base of the delta at step {}, {}, has id "
        "{:016x}, not {:016x}, or is the delta's own directory",
        st.global_step, base, id, st.base_id));
  }
  auto id = st.id != 0 ? st.id : new_checkpoint_id();
  make_root(root);
  auto tmp = make_tmp_dir(root, st.global_step);
  try {
    std::vector<shard_file_entry> files;
    files.reserve(st.shards.size());
    for (size_t i = 0; i < st.shards.size(); ++i) {
      auto name = shard_file_name(i);
      files.push_back(write_shard_file(join_path(tmp, name), st.shards[i]));
      files.back().file = name;
    }
    auto text = encode_manifest(st, files, id);
    file_writer manifest{join_path(tmp, checkpoint_manifest_name)};
    manifest.put(text.data(), text.size());
    manifest.finish();
    sync_dir(tmp);
    install(root, tmp, final_path, st.global_step);
  } catch (...) {
    remove_tree_quietly(tmp);
    throw;
  }
  sync_dir(root);
  prune_chains(root, final_name, keep, st.global_step);
  return final_path;
}

void prepare_checkpoint_root(const std::string& root) {
  try {
    detail::check_root_writable(root);
  } catch (const runtime_failure& e) {
    throw input_error(fmt::format("checkpoint directory {}", e.what()));
  }
}

namespace {

/// The state of one checkpoint directory whose manifest `m` is decoded.
checkpoint_state read_shards(const std::string& dir,
                             detail::decoded_manifest& m) {
  using namespace detail;
  // One shard file is in memory at a time besides the state.
  for (size_t i = 0; i < m.files.size(); ++i)
    read_shard_file(join_path(dir, m.files[i].file), m.files[i], m.version,
                    m.state.shards[i]);
  return std::move(m.state);
}

} // namespace

checkpoint_state read_checkpoint(const std::string& dir) {
  using namespace detail;
  // Every manifest of the chain is checked before any shard file is opened.
  auto chain = resolve_chain(dir);
  if (chain.size() == 1)
    return read_shards(dir, chain.front().manifest);
  checkpoint_replay replay{read_shards(chain[0].dir, chain[0].manifest),
                           chain[0].dir};
  for (size_t i = 1; i < chain.size(); ++i)
    replay.apply(read_shards(chain[i].dir, chain[i].manifest), chain[i].dir);
  return std::move(replay).finish();
}

checkpoint_state read_checkpoint_dir(const std::string& dir) {
  using namespace detail;
  auto path = join_path(dir, checkpoint_manifest_name);
  auto m = decode_manifest(path, read_text_file(path, "checkpoint manifest"));
  return read_shards(dir, m);
}

std::string latest_checkpoint(const std::string& root) {
  int err = 0;
  auto found = detail::list_checkpoints(root, err);
  if (err == ENOENT)
    return "";
  if (err != 0)
    throw input_error(fmt::format("{}: cannot list checkpoint directory: {}",
                                  root, detail::errno_text(err)));
  for (auto& ck : found) {
    auto dir = detail::join_path(root, ck.name);
    try {
      // A full checkpoint, or a manifest that does not read (read_checkpoint
      // reports it), is what it was before deltas: the newest.
      if (!detail::decode_manifest(
             detail::join_path(dir, detail::checkpoint_manifest_name),
             read_text_file(detail::join_path(dir,
                                              detail::checkpoint_manifest_name),
                            "checkpoint manifest"))
             .state.delta)
        return dir;
    } catch (const input_error&) {
      return dir;
    }
    try {
      detail::resolve_chain(dir);
      return dir;
    } catch (const input_error& e) {
      log::warn("checkpoint", -1, "skipping {}", e.what());
    }
  }
  return "";
}

} // namespace actorps
