#include "cluster/net/handshake.hpp"

#include <random>

#include <zlib.h>

#include <fmt/format.h>

#include "caf/config.hpp"

#include "core/job_config.hpp"
#include "core/placement.hpp"
#include "core/update_rule.hpp"

#ifndef ACTORPS_VERSION
#  define ACTORPS_VERSION "unknown"
#endif
#ifndef ACTORPS_GIT_REVISION
#  define ACTORPS_GIT_REVISION "unknown"
#endif

namespace actorps {

namespace {

const char* partitioner_name(partitioner_config::kind k) {
  switch (k) {
    case partitioner_config::kind::fixed_shards:
      return "fixed_shards";
    case partitioner_config::kind::min_size:
      return "min_size";
    case partitioner_config::kind::max_size:
      return "max_size";
  }
  return "?";
}

/// `text` cut to about 100 characters around position `at`.
std::string excerpt(const std::string& text, size_t at) {
  constexpr size_t before = 40;
  constexpr size_t width = 100;
  if (text.size() <= width)
    return text;
  auto begin = at > before ? at - before : 0;
  auto out = text.substr(begin, width);
  if (begin > 0)
    out = "..." + out;
  if (begin + width < text.size())
    out += "...";
  return out;
}

/// "coordinator", "ps0", "worker1".
std::string node_name(const handshake& hs) {
  if (hs.role == "chief")
    return "coordinator";
  return hs.role + std::to_string(hs.index);
}

void compare_field(std::vector<std::string>& out, const char* field,
                   const handshake& mine, const std::string& x,
                   const handshake& peer, const std::string& y) {
  if (x == y)
    return;
  size_t at = 0;
  while (at < x.size() && at < y.size() && x[at] == y[at])
    ++at;
  out.push_back(fmt::format("{}: \"{}\" at {}, \"{}\" at {}", field,
                            excerpt(x, at), node_name(mine), excerpt(y, at),
                            node_name(peer)));
}

} // namespace

std::string build_id() {
  return fmt::format("actorps {} (git {}, CAF {}.{}.{})", ACTORPS_VERSION,
                     ACTORPS_GIT_REVISION, CAF_VERSION / 10000,
                     CAF_VERSION / 100 % 100, CAF_VERSION % 100);
}

job_fingerprint make_fingerprint(const job_config& cfg, const placement& pl) {
  job_fingerprint fp;
  std::string layers;
  for (auto w : cfg.layers)
    layers += (layers.empty() ? "" : "-") + std::to_string(w);
  fp.model = fmt::format("{} {}, init seed {}", cfg.model, layers,
                         cfg.init_seed);
  if (!cfg.model_options.empty())
    fp.model += ", " + to_string(cfg.model_options);
  for (auto& v : pl.variables) {
    fp.variables += fp.variables.empty() ? "" : ", ";
    if (v.kind == variable_kind::dense)
      fp.variables += fmt::format("{} {}x{}", v.name, v.rows, v.cols);
    else
      fp.variables += fmt::format("{} table {}x{} init {}", v.name,
                                  v.rows == 0 ? std::string{"unbounded"}
                                              : std::to_string(v.rows),
                                  v.cols, v.init_scale);
  }
  fp.partitioning = partitioner_name(cfg.partitioner.type);
  fp.partitioning += fmt::format(" tables {}",
                                 to_string(pl.fixed_vocabulary_partition));
  for (auto& s : pl.shards) {
    auto& name = pl.variables[s.variable].name;
    if (s.kind == variable_kind::dense)
      fp.partitioning += fmt::format(", {}[{}:{})@ps{}", name, s.row_begin,
                                     s.row_end, s.ps);
    else
      fp.partitioning += fmt::format(", {}#{}@ps{}", name, s.index, s.ps);
  }
  fp.optimizer = make_update_rule(cfg.optimizer, "optimizer")->describe();
  if (cfg.optimizer.staleness_aware)
    fp.optimizer += " staleness_aware";
  if (!pl.tables.empty()) {
    fp.optimizer += "; tables: "
                    + make_update_rule(cfg.table_optimizer, "table_optimizer")
                        ->describe();
    if (cfg.table_optimizer.staleness_aware)
      fp.optimizer += " staleness_aware";
  }
  fp.consistency = cfg.mode;
  if (cfg.mode == "ssp")
    fp.consistency += fmt::format(" staleness {}", cfg.staleness);
  fp.cluster = fmt::format("{} workers, {} ps", cfg.workers, cfg.ps);
  if (groups_of(cfg) != cfg.ps)
    fp.cluster += fmt::format(", {} groups", groups_of(cfg));
  // The folder is left out: it may differ between machines and runs.
  fp.data = fmt::format("{}, train limit {}, batch size {}, shuffle seed {}",
                        cfg.dataset, cfg.train_limit, cfg.batch_size,
                        cfg.shuffle_seed);
  if (!cfg.data_options.empty())
    fp.data += ", " + to_string(cfg.data_options);
  return fp;
}

std::string fingerprint_id(const job_fingerprint& fp) {
  auto crc = crc32(0L, Z_NULL, 0);
  for (auto* field : {&fp.model, &fp.variables, &fp.partitioning,
                      &fp.optimizer, &fp.consistency, &fp.cluster, &fp.data}) {
    // The length first, so that moving text between fields changes the id.
    auto n = static_cast<uint32_t>(field->size());
    crc = crc32(crc, reinterpret_cast<const Bytef*>(&n), sizeof(n));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(field->data()),
                static_cast<uInt>(field->size()));
  }
  return fmt::format("{:08x}", crc);
}

uint64_t process_incarnation() {
  static const uint64_t value = [] {
    std::random_device rd;
    uint64_t x = 0;
    while (x == 0)
      x = (uint64_t{rd()} << 32) ^ rd();
    return x;
  }();
  return value;
}

handshake make_handshake(const job_config& cfg, const placement& pl,
                         const std::string& role, uint32_t index) {
  handshake hs;
  hs.incarnation = process_incarnation();
  hs.protocol = protocol_version;
  hs.build = build_id();
  hs.role = role;
  hs.index = index;
  hs.job = make_fingerprint(cfg, pl);
  return hs;
}

std::vector<std::string> handshake_differences(const handshake& mine,
                                               const handshake& peer) {
  std::vector<std::string> out;
  if (mine.protocol != peer.protocol)
    out.push_back(fmt::format("protocol version: {} at {}, {} at {}",
                              mine.protocol, node_name(mine), peer.protocol,
                              node_name(peer)));
  auto field = [&](const char* name, auto member) {
    compare_field(out, name, mine, mine.*member, peer, peer.*member);
  };
  auto job_field = [&](const char* name, auto member) {
    compare_field(out, name, mine, mine.job.*member, peer, peer.job.*member);
  };
  field("build", &handshake::build);
  job_field("job model", &job_fingerprint::model);
  job_field("job variables", &job_fingerprint::variables);
  job_field("job partitioning", &job_fingerprint::partitioning);
  job_field("job optimizer", &job_fingerprint::optimizer);
  job_field("job consistency", &job_fingerprint::consistency);
  job_field("job cluster", &job_fingerprint::cluster);
  job_field("job data", &job_fingerprint::data);
  return out;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (auto& l : lines)
    out += (out.empty() ? "" : "; ") + l;
  return out;
}

} // namespace actorps
