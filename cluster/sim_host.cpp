#include "cluster/sim_host.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"

#include "actors/messages.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/update_rule.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

template <class F>
double median_ns(F f) {
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    auto t0 = steady_clock::now();
    f();
    t.push_back(
      std::chrono::duration<double, std::nano>(steady_clock::now() - t0)
        .count());
  }
  std::nth_element(t.begin(), t.begin() + 3, t.end());
  return t[3];
}

} // namespace

host_spec measure_host(const job_config& cfg, uint64_t floats) {
  host_spec h;
  h.cores = std::max(1u, std::thread::hardware_concurrency());
  floats = std::max<uint64_t>(floats, 1024);
  push_request req;
  req.gradient.values.assign(floats, 0.5f);
  // Write and read the message once each (both ends' serialization), and
  // copy its bytes into and out of a socket buffer.
  auto both_ends = median_ns([&] {
    std::vector<char> buf;
    caf::binary_serializer sink{nullptr, buf};
    if (auto err = sink(req))
      return;
    std::vector<char> kernel(buf.size());
    std::memcpy(kernel.data(), buf.data(), buf.size());
    std::vector<char> received(kernel.size());
    std::memcpy(received.data(), kernel.data(), kernel.size());
    push_request out;
    caf::binary_deserializer source{nullptr, received};
    if (auto err = source(out))
      return;
  });
  h.ns_per_byte = both_ends / 2 / static_cast<double>(floats * sizeof(float));
  std::shared_ptr<const update_rule> rule = make_update_rule(cfg.optimizer);
  dense_region region{rule};
  std::vector<float> init(floats, 0.1f);
  region.append(init.data(), init.size());
  std::vector<float> g(floats, 0.01f);
  h.apply_ns_per_float = median_ns([&] { region.apply(g.data()); })
                         / static_cast<double>(floats);
  return h;
}

std::string to_string(const host_spec& h) {
  if (h.cores == 0)
    return "a machine per node";
  return fmt::format("one host of {} cores, {:.3f} ns per byte sent or "
                     "received, {:.3f} ns per float updated",
                     h.cores, h.ns_per_byte, h.apply_ns_per_float);
}

host_spec parse_host(const std::string& text) {
  auto bad = [&](const char* why) {
    return input_error(fmt::format("--host: \"{}\" {} (expected measured "
                                   "or CORES:NS_PER_BYTE:NS_PER_FLOAT, e.g. "
                                   "2:0.35:1.2)",
                                   text, why));
  };
  auto a = text.find(':');
  auto b = a == std::string::npos ? a : text.find(':', a + 1);
  if (b == std::string::npos)
    throw bad("has not three fields");
  host_spec h;
  char* end = nullptr;
  auto cores = std::strtoul(text.c_str(), &end, 10);
  if (end != text.c_str() + a || cores == 0 || cores > 4096)
    throw bad("does not start with a number of cores in [1, 4096]");
  h.cores = static_cast<uint32_t>(cores);
  auto number = [&](size_t from, size_t to, double& x) {
    auto part = text.substr(from, to - from);
    char* e = nullptr;
    x = std::strtod(part.c_str(), &e);
    if (part.empty() || e != part.c_str() + part.size() || !std::isfinite(x)
        || x < 0)
      throw bad("has a cost that is not a non-negative number");
  };
  number(a + 1, b, h.ns_per_byte);
  number(b + 1, text.size(), h.apply_ns_per_float);
  return h;
}

host_model::host_model(host_spec spec, uint32_t nodes)
  : spec_(spec),
    node_free_(nodes, 0),
    core_free_(spec.cores, 0),
    busy_(nodes, 0) {
  // nop
}

sim_time host_model::run(uint32_t n, sim_time duration, sim_time now) {
  auto core = std::min_element(core_free_.begin(), core_free_.end());
  auto start = std::max({now, node_free_.at(n), *core});
  auto end = start + duration;
  node_free_[n] = end;
  *core = end;
  busy_[n] += duration;
  return end;
}

sim_time host_model::message_cost(uint64_t bytes) const {
  return static_cast<sim_time>(
    std::ceil(spec_.ns_per_byte * static_cast<double>(bytes)));
}

sim_time host_model::apply_cost(uint64_t floats) const {
  return static_cast<sim_time>(
    std::ceil(spec_.apply_ns_per_float * static_cast<double>(floats)));
}

} // namespace actorps
