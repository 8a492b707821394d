#include "actors/key_routes.hpp"

#include <cstring>

namespace actorps {

key_routes::key_routes(const placement& pl, uint32_t servers)
  : per_ps_(servers), used_(servers, 0), entry_of_shard_(pl.shards.size(), -1) {
  // nop
}

void key_routes::route(const placement& pl,
                       const std::vector<table_lookup>& tables) {
  // Forget last step's entries (their buffers stay allocated).
  for (uint32_t p = 0; p < per_ps_.size(); ++p) {
    for (size_t i = 0; i < used_[p]; ++i)
      entry_of_shard_[per_ps_[p][i].shard] = -1;
    used_[p] = 0;
  }
  for (uint32_t t = 0; t < tables.size(); ++t) {
    auto& lookup = tables[t];
    for (uint32_t u = 0; u < lookup.keys.size(); ++u) {
      auto key = lookup.keys[u];
      auto shard = pl.shard_id_of_key(lookup.variable, key);
      auto& slot = entry_of_shard_[shard];
      auto p = pl.shards[shard].ps;
      if (slot < 0) {
        auto& list = per_ps_[p];
        if (used_[p] == list.size())
          list.emplace_back();
        auto& e = list[used_[p]];
        e.shard = shard;
        e.table = t;
        e.keys.clear();
        e.positions.clear();
        slot = static_cast<int64_t>(used_[p]++);
      }
      auto& e = per_ps_[p][static_cast<size_t>(slot)];
      e.keys.push_back(key);
      e.positions.push_back(u);
    }
  }
}

void key_routes::fill_pull(uint32_t p, std::vector<table_rows>& out) const {
  out.resize(used_[p]);
  for (size_t i = 0; i < used_[p]; ++i) {
    auto& e = per_ps_[p][i];
    out[i].shard = e.shard;
    out[i].keys.keys.assign(e.keys.begin(), e.keys.end());
    out[i].values.values.clear();
  }
}

caf::error key_routes::scatter_pull(uint32_t p,
                                    const std::vector<table_rows>& reply,
                                    std::vector<table_lookup>& tables) const {
  if (reply.size() != used_[p])
    return caf::make_error(errc::bad_message, "pull reply of ps", p,
                           "tables", used_[p], reply.size());
  for (size_t i = 0; i < used_[p]; ++i) {
    auto& e = per_ps_[p][i];
    auto& lookup = tables[e.table];
    auto dim = lookup.dim;
    auto& values = reply[i].values.values;
    if (reply[i].shard != e.shard || values.size() != e.keys.size() * dim)
      return caf::make_error(errc::bad_message, "pull reply of ps", p,
                             "shard", e.shard, reply[i].shard,
                             e.keys.size() * dim, values.size());
    for (size_t k = 0; k < e.positions.size(); ++k)
      std::memcpy(lookup.rows.data() + uint64_t{e.positions[k]} * dim,
                  values.data() + k * dim, dim * sizeof(float));
  }
  return {};
}

void key_routes::fill_push(uint32_t p, const std::vector<table_lookup>& tables,
                           std::vector<table_rows>& out) const {
  out.resize(used_[p]);
  for (size_t i = 0; i < used_[p]; ++i) {
    auto& e = per_ps_[p][i];
    auto& lookup = tables[e.table];
    auto dim = lookup.dim;
    out[i].shard = e.shard;
    out[i].keys.keys.assign(e.keys.begin(), e.keys.end());
    auto& values = out[i].values.values;
    values.resize(e.keys.size() * dim);
    for (size_t k = 0; k < e.positions.size(); ++k)
      std::memcpy(values.data() + k * dim,
                  lookup.grad.data() + uint64_t{e.positions[k]} * dim,
                  dim * sizeof(float));
  }
}

uint64_t payload_bytes(const pull_reply& x) {
  // (The dense values as floats, or encoded when the pull named a format.)
  uint64_t n = x.values.values.size() * sizeof(float) + x.encoded.bytes.size();
  for (auto& t : x.tables)
    n += t.values.values.size() * sizeof(float)
         + t.keys.keys.size() * sizeof(uint64_t);
  return n;
}

uint64_t payload_bytes(const push_request& x) {
  uint64_t n = x.gradient.values.size() * sizeof(float);
  for (auto& part : x.parts)
    n += part.tensor.bytes.size();
  for (auto& t : x.tables)
    n += t.values.values.size() * sizeof(float)
         + t.keys.keys.size() * sizeof(uint64_t);
  return n;
}

} // namespace actorps
