#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace actorps {

/// The fields of a config section that a registry entry (a model, a dataset)
/// reads itself: field name -> the field's JSON text, as found in the job
/// config. Kept as text so that the config struct needs no JSON library in
/// its header and every node sees the same bytes (fingerprints).
using option_map = std::map<std::string, std::string>;

/// Reads an option_map with checks, naming `section.field` in every error,
/// and reports fields nobody read.
///
/// ```
/// option_reader opts{cfg.model_options, "model", "embedding_mlp"};
/// auto dim = opts.get_uint("embedding_dim", 16, 1, 4096);
/// opts.finish(); // "model.dimension: unknown field for embedding_mlp"
/// ```
class option_reader {
public:
  /// @param owner  the registry entry reading them, for messages.
  option_reader(const option_map& opts, std::string section,
                std::string owner);

  /// @throws input_error "SECTION.NAME: must be a whole number" or
  ///         "SECTION.NAME: V is out of range [lo, hi]".
  uint64_t get_uint(const std::string& name, uint64_t fallback, uint64_t lo,
                    uint64_t hi);

  /// @throws input_error if not a number or outside [lo, hi].
  double get_real(const std::string& name, double fallback, double lo,
                  double hi);

  /// @throws input_error if not true or false.
  bool get_bool(const std::string& name, bool fallback);

  /// @param allowed  if not empty, the only values accepted.
  /// @throws input_error if not a string or not one of `allowed`.
  std::string get_string(const std::string& name, const std::string& fallback,
                         const std::vector<std::string>& allowed = {});

  /// @throws input_error if not an array of whole numbers in [lo, hi].
  std::vector<uint64_t> get_uints(const std::string& name,
                                  const std::vector<uint64_t>& fallback,
                                  uint64_t lo, uint64_t hi);

  /// Whether the field is present.
  bool has(const std::string& name) const;

  /// @throws input_error naming the first field that no get_* call read.
  void finish();

private:
  const std::string* find(const std::string& name);
  [[noreturn]] void fail(const std::string& name, const std::string& what);

  const option_map& opts_;
  std::string section_;
  std::string owner_;
  std::set<std::string> seen_;
};

/// Canonical text of an option map ("a=1 b=[2,3]"), for fingerprints.
std::string to_string(const option_map& opts);

} // namespace actorps
