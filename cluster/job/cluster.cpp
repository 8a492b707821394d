#include "cluster/job/cluster.hpp"

#include <memory>

#include "cluster/job/evaluation.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

/// Asks each group where `cl` routes it; a pull that fails where the group
/// has moved since (a planned move, or a join's rebalancing, during an
/// evaluation: the old server answers "moved") is sent again at the new
/// route, up to 5 times.
group_puller following_puller(cluster& cl) {
  auto routes = std::make_shared<std::vector<server_route>>(cl.routes());
  return [&cl, routes](uint32_t g, pull_request req) {
    for (int attempt = 1;; ++attempt) {
      try {
        return blocking_puller(cl.system(), *routes)(g, req);
      } catch (const runtime_failure&) {
        auto now = cl.routes();
        if (attempt == 5 || g >= now.size() || g >= routes->size()
            || now[g].view == (*routes)[g].view)
          throw;
        log::info("coordinator", -1,
                  "group {} moved while it was read: read again at ps{}", g,
                  now[g].index);
        *routes = std::move(now);
      }
    }
  };
}

} // namespace

cluster::~cluster() = default;

std::vector<float> cluster::pull_dense() {
  return actorps::pull_dense(layout(), following_puller(*this));
}

metric_list cluster::evaluate(const model& net, const dataset& data) {
  return evaluate_on_servers(layout(), following_puller(*this), net, data);
}

std::vector<ps_actor> cluster::servers() const {
  std::vector<ps_actor> out;
  for (auto& r : routes())
    out.push_back(r.ps);
  return out;
}

} // namespace actorps
