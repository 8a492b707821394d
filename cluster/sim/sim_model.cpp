#include "cluster/sim/sim_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

namespace {

/// Splits "12.5gbit" into 12.5 and "gbit"; false if it does not start with
/// a finite, non-negative number.
bool number_and_unit(const std::string& text, double& x, std::string& unit) {
  if (text.empty() || text[0] == '-' || text[0] == '+' || std::isspace(
        static_cast<unsigned char>(text[0])))
    return false;
  char* end = nullptr;
  x = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(x) || x < 0)
    return false;
  unit.assign(end);
  return true;
}

/// SplitMix64 (Steele et al., OOPSLA 2014): a well-mixed 64-bit hash.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// A uniform number in (0, 1) from a hash.
double unit_interval(uint64_t h) {
  return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
}

} // namespace

sim_time parse_duration(const std::string& text, const char* what) {
  double x = 0;
  std::string unit;
  if (!number_and_unit(text, x, unit))
    throw input_error(fmt::format("{}: \"{}\" is not a duration (e.g. 50us, "
                                  "2.5ms)",
                                  what, text));
  double scale = 0;
  if (unit == "ns")
    scale = 1;
  else if (unit == "us")
    scale = 1e3;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "s")
    scale = 1e9;
  else
    throw input_error(fmt::format("{}: \"{}\": unit \"{}\" is not one of ns, "
                                  "us, ms, s",
                                  what, text, unit));
  auto ns = x * scale;
  if (ns > 1e18)
    throw input_error(fmt::format("{}: \"{}\" is too long", what, text));
  return static_cast<sim_time>(std::llround(ns));
}

network_spec parse_network(const std::string& text) {
  auto comma = text.find(',');
  auto rate = text.substr(0, comma);
  double x = 0;
  std::string unit;
  if (!number_and_unit(rate, x, unit))
    throw input_error(fmt::format("--network \"{}\": \"{}\" is not a rate "
                                  "(e.g. 10gbit)",
                                  text, rate));
  static const std::pair<const char*, double> units[] = {
    {"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}};
  double scale = 0;
  for (auto& [name, s] : units)
    if (unit == name)
      scale = s;
  if (unit.empty())
    throw input_error(fmt::format("--network \"{}\": the rate \"{}\" has no "
                                  "unit (bit, kbit, mbit, gbit or tbit)",
                                  text, rate));
  if (scale == 0)
    throw input_error(fmt::format("--network \"{}\": rate unit \"{}\" is not "
                                  "one of bit, kbit, mbit, gbit, tbit",
                                  text, unit));
  if (x == 0)
    throw input_error(fmt::format("--network \"{}\": a rate of 0", text));
  network_spec spec;
  spec.bits_per_second = x * scale;
  if (comma != std::string::npos)
    spec.latency_ns = parse_duration(text.substr(comma + 1),
                                     "--network latency");
  return spec;
}

std::string to_string(const network_spec& net) {
  return fmt::format("{}gbit,{}us", net.bits_per_second / 1e9,
                     static_cast<double>(net.latency_ns) / 1e3);
}

network_model::network_model(network_spec spec, uint32_t nodes)
  : spec_(spec),
    out_free_(nodes, 0),
    in_free_(nodes, 0),
    bytes_out_(nodes, 0),
    bytes_in_(nodes, 0) {
  // nop
}

sim_time network_model::transmission(uint64_t bytes) const {
  return static_cast<sim_time>(
    std::ceil(static_cast<double>(bytes) * 8e9 / spec_.bits_per_second));
}

sim_time network_model::send(uint32_t from, uint32_t to, uint64_t bytes,
                             sim_time now) {
  auto start = std::max({now, out_free_.at(from), in_free_.at(to)});
  auto done = start + transmission(bytes);
  out_free_[from] = done;
  in_free_[to] = done;
  bytes_out_[from] += bytes;
  bytes_in_[to] += bytes;
  return done + spec_.latency_ns;
}

compute_spec parse_compute(const std::string& text) {
  compute_spec spec;
  if (text == "measured")
    return spec;
  auto colon = text.find(':');
  auto kind = text.substr(0, colon);
  if (colon == std::string::npos || (kind != "const" && kind != "normal"))
    throw input_error(fmt::format("--compute \"{}\": expected measured, "
                                  "const:TIME or normal:MEAN,SD",
                                  text));
  auto rest = text.substr(colon + 1);
  if (kind == "const") {
    spec.type = compute_spec::kind::constant;
    spec.mean_ns = parse_duration(rest, "--compute");
    return spec;
  }
  auto comma = rest.find(',');
  if (comma == std::string::npos)
    throw input_error(fmt::format("--compute \"{}\": normal needs MEAN,SD "
                                  "(e.g. normal:2ms,0.5ms)",
                                  text));
  spec.type = compute_spec::kind::normal;
  spec.mean_ns = parse_duration(rest.substr(0, comma), "--compute mean");
  spec.sd_ns = parse_duration(rest.substr(comma + 1), "--compute sd");
  return spec;
}

void parse_stragglers(const std::string& text, compute_spec& spec) {
  auto colon = text.find(':');
  double share = 0;
  double factor = 0;
  std::string unit;
  bool ok = colon != std::string::npos
            && number_and_unit(text.substr(0, colon), share, unit)
            && unit == "%" && share <= 100
            && number_and_unit(text.substr(colon + 1), factor, unit)
            && unit == "x" && factor >= 1;
  if (!ok)
    throw input_error(fmt::format("--stragglers \"{}\": expected SHARE%:FACTORx "
                                  "with a share in [0, 100]% and a factor >= 1 "
                                  "(e.g. 5%:3x)",
                                  text));
  spec.straggler_share = share / 100;
  spec.straggler_factor = factor;
}

compute_model::compute_model(compute_spec spec, uint32_t workers,
                             uint64_t seed)
  : spec_(spec), seed_(seed), straggler_(workers, false) {
  // Exactly round(share * workers) stragglers, the ones whose hash is
  // smallest: the same seed picks the same workers.
  auto count = static_cast<size_t>(
    std::llround(spec.straggler_share * static_cast<double>(workers)));
  std::vector<uint32_t> order(workers);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    auto ha = mix(seed ^ mix(a + 1));
    auto hb = mix(seed ^ mix(b + 1));
    return ha != hb ? ha < hb : a < b;
  });
  for (size_t i = 0; i < count && i < order.size(); ++i)
    straggler_[order[i]] = true;
}

sim_time compute_model::step_time(uint32_t worker, uint64_t closure) const {
  double t = static_cast<double>(spec_.mean_ns);
  if (spec_.type == compute_spec::kind::normal && spec_.sd_ns > 0) {
    // Box-Muller on two hashes of (seed, worker, closure).
    auto h = mix(seed_ ^ mix(worker * 0x100000001b3ULL ^ mix(closure)));
    auto u1 = unit_interval(h);
    auto u2 = unit_interval(mix(h));
    auto z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    t = std::max(0.0, t + z * static_cast<double>(spec_.sd_ns));
  }
  if (straggler_.at(worker))
    t *= spec_.straggler_factor;
  return static_cast<sim_time>(std::llround(t));
}

} // namespace actorps
