#include "core/wire_plan.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/placement.hpp"

namespace actorps {

wire_plan make_push_plan(
  const placement& layout, std::shared_ptr<const wire_format> fallback,
  const std::map<std::string, std::shared_ptr<const wire_format>>&
    per_variable) {
  auto fail = [](const std::string& why) {
    throw input_error("cluster.variable_formats: " + why);
  };
  for (auto& [name, f] : per_variable) {
    auto v = std::find_if(layout.variables.begin(), layout.variables.end(),
                          // clang 14 (C++17): a lambda cannot capture a
                          // structured binding by itself.
                          [&name = name](const auto& d) {
                            return d.name == name;
                          });
    if (v == layout.variables.end())
      fail(fmt::format("the model has no variable \"{}\"", name));
    if (v->kind != variable_kind::dense)
      fail(fmt::format("\"{}\" is an embedding table: its rows travel by "
                       "key, as floats",
                       name));
  }
  if (!fallback)
    fallback = make_wire_format("fp32");
  wire_plan plan(layout.ps_sizes.size());
  // Shards lie in their server's region in creation order; sort each
  // server's by offset to be independent of it.
  std::vector<std::vector<const shard_info*>> by_ps(plan.size());
  for (auto& s : layout.shards)
    if (s.kind == variable_kind::dense && s.size > 0)
      by_ps.at(s.ps).push_back(&s);
  for (uint32_t p = 0; p < plan.size(); ++p) {
    std::sort(by_ps[p].begin(), by_ps[p].end(),
              [](auto* a, auto* b) { return a->ps_offset < b->ps_offset; });
    for (auto* s : by_ps[p]) {
      auto i = per_variable.find(layout.variables[s->variable].name);
      auto f = i == per_variable.end() ? fallback : i->second;
      auto& runs = plan[p];
      if (!runs.empty() && runs.back().format->name() == f->name()
          && runs.back().offset + runs.back().size == s->ps_offset)
        runs.back().size += s->size;
      else
        runs.push_back(wire_run{s->ps_offset, s->size, f});
    }
    for (auto& r : plan[p]) {
      try {
        r.format->encoded_bytes(r.size);
      } catch (const input_error& e) {
        fail(fmt::format("ps {} sends {} floats at offset {} in \"{}\": {}", p,
                         r.size, r.offset, r.format->name(), e.what()));
      }
    }
  }
  return plan;
}

bool plain_floats(const wire_plan& plan, uint32_t p) {
  for (auto& r : plan.at(p))
    if (r.format->name() != "fp32")
      return false;
  return true;
}

uint64_t encoded_bytes(const wire_plan& plan, uint32_t p) {
  uint64_t n = 0;
  for (auto& r : plan.at(p))
    n += r.format->encoded_bytes(r.size);
  return n;
}

} // namespace actorps
