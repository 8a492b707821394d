// Fuzz target: a checkpoint's manifest.json as read_checkpoint decodes it
// (before any shard file is opened).
//
// Properties: decode_manifest returns a manifest or throws input_error; a
// manifest it returns has a supported version, one file entry per shard, at
// most checkpoint_max_slots slots per shard, and no (variable, index) twice.

#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>

#include "core/checkpoint_manifest.hpp"
#include "core/error.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  detail::decoded_manifest m;
  try {
    m = detail::decode_manifest("manifest.json", fuzz::as_string(data, size));
  } catch (const input_error&) {
    return 0;
  }
  fuzz::check(m.version >= detail::checkpoint_oldest_version
                && m.version <= checkpoint_format_version,
              "decode_manifest accepted an unsupported version");
  fuzz::check(m.files.size() == m.state.shards.size(),
              "decode_manifest: files and shards differ in number");
  std::set<std::pair<std::string, uint32_t>> seen;
  for (auto& s : m.state.shards) {
    fuzz::check(s.slots.size() <= checkpoint_max_slots,
                "decode_manifest accepted too many slots");
    fuzz::check(seen.emplace(s.variable, s.index).second,
                "decode_manifest accepted a (variable, index) twice");
    fuzz::check(!s.table || (s.row_begin == 0 && s.row_end == 0),
                "decode_manifest accepted a table shard with rows");
    fuzz::check(s.table || s.row_begin <= s.row_end,
                "decode_manifest accepted row_end < row_begin");
  }
  return 0;
}
