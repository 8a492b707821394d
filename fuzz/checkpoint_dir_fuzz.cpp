// Fuzz target: a whole checkpoint directory, as `--restore` and a recovering
// coordinator read it (read_checkpoint).
//
// Input: manifest.json, then the shard files, each after a line "#FILE"
// ("MANIFEST\n#FILE\nBYTES0\n#FILE\nBYTES1"); the files are named
// shard-0000.bin, shard-0001.bin, ... in order. Where the manifest is a JSON
// object with a "shards" array, the harness sets each entry's "crc32" to the
// true CRC-32 of the file it names (if that file is one of the input's), so
// that the fuzzer gets past the checksum. checkpoint_manifest and
// checkpoint_shard fuzz the two parts without that help.
//
// Properties: read_checkpoint returns a state or throws input_error; a state
// it returns is one write_checkpoint accepts, and reading that back gives
// the same state bit for bit.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string_view>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "core/checkpoint.hpp"
#include "core/checkpoint_manifest.hpp"
#include "core/error.hpp"
#include "fuzz/checkpoint_checks.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

namespace {

constexpr std::string_view separator = "\n#FILE\n";

/// Sets the "crc32" of every shard entry of `manifest` that names one of
/// `files` to that file's CRC-32; leaves any other text as it is.
std::string fix_checksums(const std::string& manifest,
                          const std::map<std::string, std::string>& files) {
  auto js = nlohmann::json::parse(manifest, nullptr, false);
  if (js.is_discarded() || !js.is_object())
    return manifest;
  auto shards = js.find("shards");
  if (shards == js.end() || !shards->is_array())
    return manifest;
  for (auto& entry : *shards) {
    if (!entry.is_object())
      continue;
    auto name = entry.find("file");
    if (name == entry.end() || !name->is_string())
      continue;
    auto f = files.find(name->get<std::string>());
    if (f == files.end())
      continue;
    auto crc = crc32(crc32(0L, Z_NULL, 0),
                     reinterpret_cast<const Bytef*>(f->second.data()),
                     static_cast<uInt>(f->second.size()));
    entry["crc32"] = fmt::format("{:08x}", crc);
  }
  try {
    return js.dump();
  } catch (const nlohmann::json::exception&) {
    return manifest; // strings that are not UTF-8
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto text = fuzz::as_string(data, size);
  std::vector<std::string> parts;
  size_t from = 0;
  for (;;) {
    auto at = text.find(separator, from);
    parts.push_back(text.substr(from, at - from));
    if (at == std::string::npos)
      break;
    from = at + separator.size();
  }
  std::map<std::string, std::string> files;
  for (size_t i = 1; i < parts.size(); ++i)
    files[detail::shard_file_name(i - 1)] = parts[i];
  auto dir = fuzz::scratch_dir("ckpt-0000000001");
  fuzz::write_file(dir + "/manifest.json", fix_checksums(parts[0], files));
  for (auto& [name, bytes] : files)
    fuzz::write_file(dir + "/" + name, bytes);
  checkpoint_state st;
  try {
    st = read_checkpoint(dir);
  } catch (const input_error&) {
    return 0;
  }
  auto root = fuzz::scratch_dir("rewritten");
  std::string copy;
  try {
    copy = write_checkpoint(root, st, 1);
  } catch (const std::invalid_argument& e) {
    fuzz::fail(std::string{"read_checkpoint returned a state that "
                           "write_checkpoint refuses: "}
               + e.what());
  }
  try {
    fuzz::check(fuzz::same_state(read_checkpoint(copy), st),
                "a checkpoint changes when written and read again");
  } catch (const input_error& e) {
    fuzz::fail(std::string{"a rewritten checkpoint does not read back: "}
               + e.what());
  }
  return 0;
}
