#include "core/checkpoint.hpp"

#include <cerrno>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "core/checkpoint_files.hpp"
#include "core/checkpoint_manifest.hpp"
#include "core/checkpoint_shard_file.hpp"
#include "core/error.hpp"

// The three layers: checkpoint_files (directories, durability, pruning),
// checkpoint_shard_file (the binary codec of one shard) and
// checkpoint_manifest (manifest.json and the rules of a valid state). This
// file puts them in order.

namespace actorps {

std::string write_checkpoint(const std::string& root,
                             const checkpoint_state& st, uint32_t keep) {
  using namespace detail;
  if (keep == 0)
    throw std::invalid_argument("write_checkpoint: keep must be at least 1");
  validate_state(st);
  make_root(root);
  auto final_name = checkpoint_dir_name(st.global_step);
  auto final_path = join_path(root, final_name);
  auto tmp = make_tmp_dir(root, st.global_step);
  try {
    std::vector<shard_file_entry> files;
    files.reserve(st.shards.size());
    for (size_t i = 0; i < st.shards.size(); ++i) {
      auto name = shard_file_name(i);
      files.push_back(write_shard_file(join_path(tmp, name), st.shards[i]));
      files.back().file = name;
    }
    auto text = encode_manifest(st, files);
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
  prune(root, final_name, keep, st.global_step);
  return final_path;
}

void prepare_checkpoint_root(const std::string& root) {
  try {
    detail::check_root_writable(root);
  } catch (const runtime_failure& e) {
    throw input_error(fmt::format("checkpoint directory {}", e.what()));
  }
}

checkpoint_state read_checkpoint(const std::string& dir) {
  using namespace detail;
  auto path = join_path(dir, checkpoint_manifest_name);
  auto text = read_text_file(path, "checkpoint manifest");
  // The whole manifest is checked before any shard file is opened, and one
  // shard file is in memory at a time.
  auto m = decode_manifest(path, text);
  for (size_t i = 0; i < m.files.size(); ++i)
    read_shard_file(join_path(dir, m.files[i].file), m.files[i], m.version,
                    m.state.shards[i]);
  return std::move(m.state);
}

std::string latest_checkpoint(const std::string& root) {
  int err = 0;
  auto found = detail::list_checkpoints(root, err);
  if (err == ENOENT)
    return "";
  if (err != 0)
    throw input_error(fmt::format("{}: cannot list checkpoint directory: {}",
                                  root, detail::errno_text(err)));
  return found.empty() ? "" : detail::join_path(root, found.front().name);
}

} // namespace actorps
