#include "core/cpu_affinity.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sched.h>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

namespace {

/// Largest CPU number a list may name: glibc's default cpu_set_t (1024 CPUs)
/// is too small for the largest hosts, so sets are allocated (CPU_ALLOC) up
/// to this.
constexpr int max_cpus = 4096;

/// Parses the CPU number `text` (a part of `list`).
int parse_cpu(const std::string& text, const std::string& list,
              const std::string& name) {
  if (text.empty() || text.size() > 4
      || !std::all_of(text.begin(), text.end(),
                      [](char c) { return c >= '0' && c <= '9'; }))
    throw input_error(fmt::format("{}: \"{}\": \"{}\" is not a CPU number "
                                  "(a list looks like \"0-3,8\")",
                                  name, list, text));
  auto cpu = std::stoi(text);
  if (cpu >= max_cpus)
    throw input_error(fmt::format("{}: \"{}\": CPU {} is beyond the largest "
                                  "supported ({})",
                                  name, list, cpu, max_cpus - 1));
  return cpu;
}

} // namespace

cpu_affinity parse_cpu_affinity(const std::string& value,
                                const std::string& name) {
  if (value == "auto")
    return cpu_affinity::automatic;
  if (value == "none")
    return cpu_affinity::none;
  throw input_error(
    fmt::format("{}: \"{}\": must be \"auto\" or \"none\"", name, value));
}

std::vector<int> parse_cpu_list(const std::string& text,
                                const std::string& name) {
  if (text.empty())
    throw input_error(fmt::format("{}: an empty CPU list", name));
  std::vector<int> cpus;
  size_t start = 0;
  for (;;) {
    auto comma = text.find(',', start);
    auto part = text.substr(start, comma == std::string::npos
                                     ? std::string::npos
                                     : comma - start);
    auto dash = part.find('-');
    if (dash == std::string::npos) {
      cpus.push_back(parse_cpu(part, text, name));
    } else {
      auto lo = parse_cpu(part.substr(0, dash), text, name);
      auto hi = parse_cpu(part.substr(dash + 1), text, name);
      if (hi < lo)
        throw input_error(fmt::format("{}: \"{}\": the range \"{}\" goes "
                                      "backwards",
                                      name, text, part));
      for (auto c = lo; c <= hi; ++c)
        cpus.push_back(c);
    }
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    auto j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    if (!out.empty())
      out += ',';
    out += j == i ? fmt::format("{}", cpus[i])
                  : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> allowed_cpus() {
  std::vector<int> out;
  auto* set = CPU_ALLOC(max_cpus);
  if (set == nullptr)
    return out;
  auto size = CPU_ALLOC_SIZE(max_cpus);
  CPU_ZERO_S(size, set);
  if (sched_getaffinity(0, size, set) == 0)
    for (int c = 0; c < max_cpus; ++c)
      if (CPU_ISSET_S(c, size, set))
        out.push_back(c);
  CPU_FREE(set);
  return out;
}

cpu_assignment assign_cpus(const std::vector<int>& cpus, uint32_t ps,
                           uint32_t workers) {
  cpu_assignment out;
  out.ps.resize(ps);
  out.workers.resize(workers);
  // The order of dealing: ps and workers interleaved by index.
  std::vector<std::vector<int>*> order;
  for (uint32_t i = 0; i < std::max(ps, workers); ++i) {
    if (i < ps)
      order.push_back(&out.ps[i]);
    if (i < workers)
      order.push_back(&out.workers[i]);
  }
  auto n = order.size();
  auto c = cpus.size();
  if (c == 0)
    return out;
  for (size_t k = 0; k < n; ++k) {
    auto& mine = *order[k];
    if (n <= c) {
      for (auto i = k * c / n; i < (k + 1) * c / n; ++i)
        mine.push_back(cpus[i]);
    } else {
      mine.push_back(cpus[k * c / n]);
    }
  }
  return out;
}

std::string apply_cpu_set(const std::vector<int>& cpus) {
  if (cpus.empty())
    return "an empty CPU set";
  auto* set = CPU_ALLOC(max_cpus);
  if (set == nullptr)
    return "out of memory";
  auto size = CPU_ALLOC_SIZE(max_cpus);
  CPU_ZERO_S(size, set);
  for (auto c : cpus)
    if (c >= 0 && c < max_cpus)
      CPU_SET_S(c, size, set);
  std::string why;
  // pid 0: the calling thread (Linux keeps affinities per thread).
  if (sched_setaffinity(0, size, set) != 0)
    why = fmt::format("sched_setaffinity({}): {}", format_cpu_list(cpus),
                      std::strerror(errno));
  CPU_FREE(set);
  return why;
}

} // namespace actorps
