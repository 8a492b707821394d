#include "core/options.hpp"

#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace actorps {

namespace {

using json = nlohmann::json;

/// Parses a field's JSON text; nullopt-like empty json on failure.
bool parse(const std::string& text, json& out) {
  out = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return !out.is_discarded();
}

/// Whether `j` is a whole number >= 0 that fits uint64_t; stores it in `out`.
/// Accepts integral floating-point literals (1e7), which JSON writers emit.
bool whole_number(const json& j, uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer())
    return false; // negative
  if (j.is_number_float()) {
    auto x = j.get<double>();
    // 2^64 as a double is exact; everything below it converts without loss
    // of the integral value (it is a double already).
    if (std::isfinite(x) && x >= 0 && x < 18446744073709551616.0
        && std::floor(x) == x) {
      out = static_cast<uint64_t>(x);
      return true;
    }
  }
  return false;
}

} // namespace

option_reader::option_reader(const option_map& opts, std::string section,
                             std::string owner)
  : opts_(opts), section_(std::move(section)), owner_(std::move(owner)) {
  // nop
}

const std::string* option_reader::find(const std::string& name) {
  seen_.insert(name);
  auto i = opts_.find(name);
  return i == opts_.end() ? nullptr : &i->second;
}

void option_reader::fail(const std::string& name, const std::string& what) {
  throw input_error(fmt::format("{}.{}: {}", section_, name, what));
}

bool option_reader::has(const std::string& name) const {
  return opts_.count(name) > 0;
}

uint64_t option_reader::get_uint(const std::string& name, uint64_t fallback,
                                 uint64_t lo, uint64_t hi) {
  auto* text = find(name);
  if (text == nullptr)
    return fallback;
  json j;
  uint64_t x = 0;
  if (!parse(*text, j) || !j.is_number())
    fail(name, fmt::format("must be a whole number, got {}", *text));
  if (!whole_number(j, x)) {
    if (j.is_number_integer())
      fail(name, fmt::format("{} is out of range [{}, {}]", *text, lo, hi));
    fail(name, fmt::format("must be a whole number, got {}", *text));
  }
  if (x < lo || x > hi)
    fail(name, fmt::format("{} is out of range [{}, {}]", x, lo, hi));
  return x;
}

double option_reader::get_real(const std::string& name, double fallback,
                               double lo, double hi) {
  auto* text = find(name);
  if (text == nullptr)
    return fallback;
  json j;
  if (!parse(*text, j) || !j.is_number())
    fail(name, fmt::format("must be a number, got {}", *text));
  auto x = j.get<double>();
  if (!(x >= lo && x <= hi))
    fail(name, fmt::format("{} is out of range [{}, {}]", x, lo, hi));
  return x;
}

bool option_reader::get_bool(const std::string& name, bool fallback) {
  auto* text = find(name);
  if (text == nullptr)
    return fallback;
  json j;
  if (!parse(*text, j) || !j.is_boolean())
    fail(name, fmt::format("must be true or false, got {}", *text));
  return j.get<bool>();
}

std::string option_reader::get_string(const std::string& name,
                                      const std::string& fallback,
                                      const std::vector<std::string>& allowed) {
  auto* text = find(name);
  if (text == nullptr)
    return fallback;
  json j;
  if (!parse(*text, j) || !j.is_string())
    fail(name, fmt::format("must be a string, got {}", *text));
  auto x = j.get<std::string>();
  if (!allowed.empty()) {
    bool ok = false;
    for (auto& a : allowed)
      ok = ok || a == x;
    if (!ok)
      fail(name, fmt::format("\"{}\" is not one of: {}", x,
                             fmt::join(allowed, ", ")));
  }
  return x;
}

std::vector<uint64_t>
option_reader::get_uints(const std::string& name,
                         const std::vector<uint64_t>& fallback, uint64_t lo,
                         uint64_t hi) {
  auto* text = find(name);
  if (text == nullptr)
    return fallback;
  json j;
  if (!parse(*text, j) || !j.is_array())
    fail(name, fmt::format("must be an array of whole numbers, got {}", *text));
  std::vector<uint64_t> result;
  result.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    uint64_t x = 0;
    if (!whole_number(j[i], x)) {
      if (j[i].is_number_integer())
        fail(name, fmt::format("element {} ({}) is out of range [{}, {}]", i,
                               j[i].dump(), lo, hi));
      fail(name, fmt::format("element {} must be a whole number, got {}", i,
                             j[i].dump()));
    }
    if (x < lo || x > hi)
      fail(name, fmt::format("element {} ({}) is out of range [{}, {}]", i, x,
                             lo, hi));
    result.push_back(x);
  }
  return result;
}

void option_reader::finish() {
  for (auto& kv : opts_)
    if (seen_.count(kv.first) == 0)
      fail(kv.first, fmt::format("unknown field for {}", owner_));
}

std::string to_string(const option_map& opts) {
  std::string result;
  for (auto& [name, text] : opts) {
    if (!result.empty())
      result += ' ';
    result += name;
    result += '=';
    // Canonical JSON (no spaces, shortest numbers) when the text parses, so
    // that "[2, 3]" and "[2,3]" give the same fingerprint.
    json j;
    result += parse(text, j) ? j.dump() : text;
  }
  return result;
}

} // namespace actorps
