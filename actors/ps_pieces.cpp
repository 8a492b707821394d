#include "actors/ps_pieces.hpp"

#include <fmt/format.h>

#include "actors/ps_state.hpp"
#include "core/errc.hpp"

namespace actorps {

namespace {

caf::error bad_piece(uint32_t ps_index, uint32_t group, const std::string& why) {
  return caf::make_error(errc::bad_message, "push piece to ps", ps_index,
                         "group", group, why);
}

} // namespace

caf::expected<piece_result> apply_piece(ps_replica& r, const push_request& req,
                                        const ps_options& opts,
                                        uint64_t staleness, uint32_t ps_index) {
  auto region = r.dense.size();
  auto n = req.gradient.values.size();
  if (n == 0 || req.offset > region || n > region - req.offset)
    return bad_piece(ps_index, r.group,
                     fmt::format("a run of {} floats at offset {} in a region "
                                 "of {}",
                                 n, req.offset, region));
  if (r.was_applied(req.id.closure))
    return piece_result{piece_outcome::duplicate, staleness};
  auto found = r.partial.find(req.id.closure);
  if (found != r.partial.end()) {
    for (auto [offset, size] : found->second.runs) {
      if (offset == req.offset && size == n)
        return piece_result{piece_outcome::duplicate,
                            found->second.staleness};
      if (req.offset < offset + size && offset < req.offset + n)
        return bad_piece(ps_index, r.group,
                         fmt::format("run [{}, {}) overlaps run [{}, {}) of "
                                     "the same update",
                                     req.offset, req.offset + n, offset,
                                     offset + size));
    }
  }
  if (found == r.partial.end()) {
    ps_replica::partial_push fresh;
    fresh.step = r.dense.begin_step();
    fresh.staleness = staleness;
    found = r.partial.emplace(req.id.closure, std::move(fresh)).first;
  }
  auto& pp = found->second;
  auto [dense_step, table_step] = step_scales(opts, pp.staleness);
  r.dense.apply_run(req.gradient.values.data(), req.offset, n, pp.step,
                    dense_step);
  for (auto& t : req.tables) {
    r.tables.at(t.shard).apply(t.keys.keys.data(), t.keys.keys.size(),
                               t.values.values.data(), 1.0f, table_step);
    r.stats.keys_pushed += t.keys.keys.size();
  }
  pp.covered += n;
  pp.runs.emplace_back(req.offset, n);
  ++r.stats.pieces;
  piece_result result{piece_outcome::part, pp.staleness};
  if (pp.covered == region) {
    result.outcome = piece_outcome::whole;
    r.partial.erase(found);
    r.applied.insert(req.id.closure);
  }
  return result;
}

key_buffer encode_partials(const ps_replica& r) {
  key_buffer out;
  auto& k = out.keys;
  for (auto& [closure, pp] : r.partial) {
    k.insert(k.end(), {closure, pp.step, pp.staleness, pp.covered,
                       static_cast<uint64_t>(pp.runs.size())});
    for (auto [offset, size] : pp.runs)
      k.insert(k.end(), {offset, size});
  }
  return out;
}

caf::expected<std::map<uint64_t, ps_replica::partial_push>>
decode_partials(const ps_replica& r, const key_buffer& keys,
                uint32_t ps_index) {
  auto& k = keys.keys;
  auto region = r.dense.size();
  std::map<uint64_t, ps_replica::partial_push> result;
  size_t i = 0;
  auto bad = [&](const std::string& why) {
    return bad_piece(ps_index, r.group, "partial pushes of a snapshot: " + why);
  };
  while (i < k.size()) {
    if (k.size() - i < 5)
      return bad("an update cut short");
    auto closure = k[i];
    ps_replica::partial_push pp;
    pp.step = k[i + 1];
    pp.staleness = k[i + 2];
    pp.covered = k[i + 3];
    auto runs = k[i + 4];
    i += 5;
    if (runs == 0 || runs > (k.size() - i) / 2)
      return bad(fmt::format("closure {}: {} runs", closure, runs));
    uint64_t sum = 0;
    for (uint64_t j = 0; j < runs; ++j, i += 2) {
      auto offset = k[i];
      auto size = k[i + 1];
      if (size == 0 || offset > region || size > region - offset)
        return bad(fmt::format("closure {}: run of {} floats at {} in a "
                               "region of {}",
                               closure, size, offset, region));
      sum += size;
      pp.runs.emplace_back(offset, size);
    }
    if (sum != pp.covered || sum >= region)
      return bad(fmt::format("closure {}: runs of {} floats, {} covered, "
                             "region of {}",
                             closure, sum, pp.covered, region));
    if (!result.emplace(closure, std::move(pp)).second)
      return bad(fmt::format("closure {} twice", closure));
  }
  return result;
}

void prune_partials(ps_replica& r, uint64_t first, uint64_t watermark) {
  if (watermark <= first)
    return;
  r.partial.erase(r.partial.lower_bound(first),
                  r.partial.lower_bound(watermark));
}

} // namespace actorps
