#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace actorps {

/// Where a registry entry comes from: compiled into the library (one line in
/// a registry table, never removed) or added at run time by a program built
/// on the library (removable again).
enum class registry_origin { built_in, added };

/// A table of named entries (factories or descriptors) that a program can
/// extend at run time: the update rules, wire formats, models, step functions
/// and datasets each keep one. The public register_X / unregister_X / X_names
/// functions are thin wrappers around one of these.
///
/// Names are unique and compared byte for byte. names() lists them sorted, so
/// every process of a cluster lists the same names in the same order, however
/// its registrations interleaved.
///
/// Thread-safe: every member may be called from any thread. find() returns a
/// copy of the entry, so an entry should be cheap to copy (a function pointer,
/// a std::function, a shared_ptr); the copy stays valid after remove().
///
/// @tparam Entry  what a name stands for; copyable.
template <class Entry>
class registry {
public:
  /// @param caller  the registering function, as messages name it
  ///                ("register_update_rule").
  /// @param noun    what an entry is, as messages name it ("rule").
  registry(std::string caller, std::string noun)
    : caller_(std::move(caller)), noun_(std::move(noun)) {
    // nop
  }

  /// As above, with the built-in entries of `table` (a range of lines with a
  /// `name` member, e.g. an array of structs): each line is added as
  /// `line.name` -> `to_entry(line)`, origin built_in.
  /// @throws std::invalid_argument for an empty or repeated name.
  template <class Table, class ToEntry>
  registry(std::string caller, std::string noun, const Table& table,
           ToEntry to_entry)
    : registry(std::move(caller), std::move(noun)) {
    for (auto& line : table)
      add(line.name, to_entry(line), registry_origin::built_in);
  }

  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  // -- changes ----------------------------------------------------------------

  /// Adds `entry` as `name`.
  /// @throws std::invalid_argument "CALLER: empty name",
  ///         "CALLER(\"NAME\"): a built-in NOUN has that name" or
  ///         "CALLER(\"NAME\"): registered before"; nothing changes then.
  void add(const std::string& name, Entry entry,
           registry_origin origin = registry_origin::added) {
    if (name.empty())
      throw std::invalid_argument(caller_ + ": empty name");
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = entries_.find(name);
    if (i != entries_.end())
      throw std::invalid_argument(
        caller_ + "(\"" + name + "\"): "
        + (i->second.origin == registry_origin::built_in
             ? "a built-in " + noun_ + " has that name"
             : std::string{"registered before"}));
    entries_.emplace(name, slot{std::move(entry), origin});
  }

  /// Removes the entry `name` that add() added at run time; the name is free
  /// again. Built-in entries are never removed.
  /// @returns the entry removed, or std::nullopt (for a built-in or unknown
  ///          name; nothing changes then).
  std::optional<Entry> remove(const std::string& name) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = entries_.find(name);
    if (i == entries_.end() || i->second.origin == registry_origin::built_in)
      return std::nullopt;
    auto result = std::move(i->second.entry);
    entries_.erase(i);
    return result;
  }

  // -- lookups ----------------------------------------------------------------

  /// The entry `name` stands for, or std::nullopt for an unknown name.
  std::optional<Entry> find(const std::string& name) const {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = entries_.find(name);
    if (i == entries_.end())
      return std::nullopt;
    return i->second.entry;
  }

  /// Every name, sorted (byte order).
  std::vector<std::string> names() const {
    std::vector<std::string> result;
    std::lock_guard<std::mutex> guard{mtx_};
    result.reserve(entries_.size());
    for (auto& kv : entries_)
      result.push_back(kv.first);
    return result;
  }

  /// names() joined by ", ", for "(known: ...)" in messages.
  std::string known() const {
    std::string result;
    for (auto& name : names())
      result += (result.empty() ? "" : ", ") + name;
    return result;
  }

private:
  struct slot {
    Entry entry;
    registry_origin origin;
  };

  std::string caller_;
  std::string noun_;
  mutable std::mutex mtx_;
  std::map<std::string, slot> entries_;
};

} // namespace actorps
