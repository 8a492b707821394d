#include "cluster/job/cluster.hpp"

#include "cluster/job/evaluation.hpp"

namespace actorps {

cluster::~cluster() = default;

std::vector<float> cluster::pull_dense() {
  return actorps::pull_dense(system(), layout(), routes());
}

metric_list cluster::evaluate(const model& net, const dataset& data) {
  return evaluate_on_servers(system(), layout(), routes(), net, data);
}

std::vector<ps_actor> cluster::servers() const {
  std::vector<ps_actor> out;
  for (auto& r : routes())
    out.push_back(r.ps);
  return out;
}

} // namespace actorps
