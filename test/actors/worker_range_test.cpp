// A closure that carries a data_range trains on exactly those examples,
// read through the worker's range_reader, and says where it was in its
// data position; a worker without a reader fails such a closure.

#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "actors/worker_actor.hpp"
#include "core/data_range.hpp"
#include "core/example_batch.hpp"
#include "test/actor_fixture.hpp"
#include "test/actors/worker_fixture.hpp"

using namespace actorps;

namespace {

/// Serves rows [begin, end) of one dataset, remembering what it was asked.
struct recording_reader : range_reader {
  std::shared_ptr<const dataset> data;
  std::vector<data_range> asked;

  void read(const data_range& r, example_batch& out) override {
    asked.push_back(r);
    out.reset(data->examples.dense_dim, data->examples.fields.size());
    for (auto row = r.begin; row < r.end; ++row)
      out.append_row(data->examples, row);
  }
};

step_result run_range(test::actor_fixture& t, const worker_actor& worker,
                      uint64_t c, data_range range, caf::error* failed) {
  step_result out;
  t.self->request(worker, test::reply_timeout, run_atom_v,
                  closure_request{c, train_step_name, std::move(range)})
    .receive([&](step_result& r) { out = r; },
             [&](caf::error& err) {
               if (failed)
                 *failed = err;
               else
                 FAIL("closure " << c << " failed: " << t.sys.render(err));
             });
  return out;
}

} // namespace

TEST_CASE("a closure with a data range trains on those examples, read by "
          "the worker's range reader",
          "[worker][stream]") {
  test::actor_fixture t{false};
  auto reader = std::make_shared<recording_reader>();
  job_config cfg;
  cfg.optimizer = optimizer_config{"adam", 0.01f, {}};
  test::small_job job{t, cfg, [&](worker_options& o) {
                        reader->data = test::tiny_data();
                        o.ranges = reader;
                      }};
  auto r = run_range(t, job.worker, 1, data_range{7, "part-7.csv", 8, 13},
                     nullptr);
  CHECK(r.samples == 5);
  CHECK(r.data_epoch == 7);   // the part
  CHECK(r.data_offset == 13); // the end of its rows
  REQUIRE(reader->asked.size() == 1);
  CHECK(reader->asked[0].name == "part-7.csv");
  CHECK(reader->asked[0].begin == 8);
  CHECK(job.stats(t).pushes == 1); // it pushed
  // A closure without a range reads the worker's own source (batches of 8).
  auto own = job.run(t, 2);
  CHECK(own.samples == 8);
  CHECK(reader->asked.size() == 1);
}

TEST_CASE("a worker without a range reader fails a closure with a data range",
          "[worker][stream]") {
  test::actor_fixture t{false};
  job_config cfg;
  test::small_job job{t, cfg, [](worker_options&) {}};
  caf::error err;
  run_range(t, job.worker, 1, data_range{0, "p", 0, 4}, &err);
  REQUIRE(err);
  CHECK_THAT(t.sys.render(err), Catch::Contains("reads no data ranges"));
}
