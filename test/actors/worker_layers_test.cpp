// Layer pushes (worker_options::layer_pushes): a worker pushes each layer's
// gradient while backpropagation goes on, as pieces of its push; the
// servers end with the values whole pushes give. The model's side
// (model_workspace::gradient_ready) is checked here too.

#include <memory>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "actors/ps_actor.hpp"
#include "actors/worker_actor.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "core/job_config.hpp"
#include "core/placement.hpp"
#include "models/registry.hpp"
#include "test/actor_fixture.hpp"
#include "test/actors/worker_fixture.hpp"

using namespace actorps;
using test::tiny_data;

namespace {

/// Two async servers (Adam) and one worker: an MLP 4-3-2 whose kernels and
/// biases are split over both.
test::small_job two_servers(test::actor_fixture& t, bool layers) {
  job_config cfg;
  cfg.ps = 2;
  cfg.optimizer = optimizer_config{"adam", 0.01f, {}};
  return test::small_job{t, cfg,
                         [&](worker_options& o) { o.layer_pushes = layers; }};
}

} // namespace

TEST_CASE("with layer pushes, a worker pushes each layer in a piece of its "
          "push and the servers end where whole pushes take them",
          "[worker][layers]") {
  test::actor_fixture t{false};
  auto whole = two_servers(t, false);
  auto layers = two_servers(t, true);
  for (uint64_t c = 1; c <= 6; ++c) {
    auto a = test::run_closure(t, whole.worker, c);
    auto b = test::run_closure(t, layers.worker, c);
    CHECK(b.loss == Approx(a.loss).margin(1e-6));
    CHECK(b.bytes_pushed == a.bytes_pushed);
  }
  for (uint32_t p = 0; p < 2; ++p) {
    auto w = whole.values(t, p);
    auto l = layers.values(t, p);
    REQUIRE(l.size() == w.size());
    for (size_t i = 0; i < l.size(); ++i)
      CHECK(l[i] == Approx(w[i]).margin(1e-6));
    auto sw = whole.stats(t, p);
    auto sl = layers.stats(t, p);
    CHECK(sw.pushes == 6);
    CHECK(sl.pushes == 6);
    CHECK(sw.pieces == 0);
    // Each server holds a part of both layers: the second layer's part
    // goes during the compute, the first's after it, so two per step.
    CHECK(sl.pieces == 12);
    CHECK(sl.staleness_max == 0);
  }
}

TEST_CASE("an MLP says each layer's gradient is final as soon as it is, "
          "last layer first",
          "[models][layers]") {
  job_config cfg;
  cfg.layers = {4, 3, 2};
  auto data = tiny_data();
  auto net = make_model(cfg, data->schema);
  auto ws = net->make_workspace(8);
  std::vector<float> params(net->dense_parameters());
  net->initialize(params.data(), 1);
  std::vector<float> grad(params.size(), 0.0f);
  std::vector<std::pair<ptrdiff_t, ptrdiff_t>> runs;
  // A run reported final holds its final floats already: compared with the
  // gradient once the whole call returned.
  std::vector<std::vector<float>> seen;
  ws->gradient_ready = [&](const float* first, const float* last) {
    runs.emplace_back(first - grad.data(), last - grad.data());
    seen.emplace_back(first, last);
  };
  example_batch batch;
  batch_iterator it{data, input_context{1, 0}, 8, 1};
  it.next(batch);
  model_inputs in{params.data(), nullptr};
  net->loss_and_gradient(in, batch, grad.data(), *ws);
  // Layer 1: kernel 3 x 2 and bias 2 at 15; layer 0: kernel 4 x 3 and
  // bias 3 at 0.
  REQUIRE(runs == std::vector<std::pair<ptrdiff_t, ptrdiff_t>>{{15, 23},
                                                               {0, 15}});
  for (size_t i = 0; i < runs.size(); ++i)
    CHECK(seen[i] == std::vector<float>(grad.begin() + runs[i].first,
                                        grad.begin() + runs[i].second));
}
