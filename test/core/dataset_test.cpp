#include "core/dataset.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/example_batch.hpp"
#include "core/idx.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;

namespace {

/// A dataset whose row i has dense features (i, -i), label i % classes and,
/// in the weighted sparse field "tags", i % 3 keys 10 i + k with values k + 0.5
/// (k = 0, 1, ...), so that a batch tells which rows it holds.
std::shared_ptr<const dataset> numbered_rows(uint64_t rows,
                                             uint32_t classes = 3) {
  auto result = std::make_shared<dataset>();
  result->schema.dense_dim = 2;
  result->schema.fields.push_back(field_schema{"tags", 10 * rows + 3, true});
  result->schema.labels = label_kind::multiclass;
  result->schema.classes = classes;
  auto& ex = result->examples;
  ex.reset(2, 1);
  for (uint64_t i = 0; i < rows; ++i) {
    ex.dense.push_back(static_cast<float>(i));
    ex.dense.push_back(-static_cast<float>(i));
    auto& tags = ex.fields[0];
    for (uint64_t k = 0; k < i % 3; ++k) {
      tags.keys.push_back(10 * i + k);
      tags.values.push_back(static_cast<float>(k) + 0.5f);
    }
    tags.offsets.push_back(tags.keys.size());
    ex.labels.push_back(static_cast<int32_t>(i % classes));
    ++ex.rows;
  }
  ex.check("numbered_rows");
  return result;
}

/// Takes `batches` batches and returns the row numbers they hold, checking
/// that every row of every batch is a consistent copy of a dataset row.
std::vector<uint32_t> take_rows(batch_source& it, size_t batches) {
  const auto b = it.batch_size();
  std::vector<uint32_t> rows;
  example_batch batch;
  for (size_t k = 0; k < batches; ++k) {
    it.next(batch);
    REQUIRE_NOTHROW(batch.check("batch"));
    REQUIRE(batch.rows == b);
    REQUIRE(batch.dense_dim == 2);
    REQUIRE(batch.fields.size() == 1);
    const auto& tags = batch.fields[0];
    for (uint64_t i = 0; i < b; ++i) {
      auto row = batch.dense[i * 2];
      REQUIRE(row >= 0.0f);
      REQUIRE(batch.dense[i * 2 + 1] == -row);
      auto r = static_cast<uint32_t>(row);
      REQUIRE(batch.labels[i] == static_cast<int32_t>(r % it.schema().classes));
      REQUIRE(tags.offsets[i + 1] - tags.offsets[i] == r % 3);
      for (uint64_t k = 0; k < r % 3; ++k) {
        REQUIRE(tags.keys[tags.offsets[i] + k] == 10 * r + k);
        REQUIRE(tags.values[tags.offsets[i] + k]
                == static_cast<float>(k) + 0.5f);
      }
      rows.push_back(r);
    }
  }
  return rows;
}

std::vector<uint32_t> sorted(std::vector<uint32_t> xs) {
  std::sort(xs.begin(), xs.end());
  return xs;
}

} // namespace

TEST_CASE("shard_indices gives disjoint shards that cover every row exactly "
          "once",
          "[core][dataset]") {
  struct shard_case {
    uint64_t rows;
    uint32_t workers;
  };
  const std::vector<shard_case> cases{{10, 1}, {10, 2}, {10, 3}, {7, 4},
                                      {3, 5},  {0, 2},  {60000, 7}};
  for (auto& c : cases) {
    INFO(c.rows << " rows over " << c.workers << " workers");
    std::vector<int> seen(c.rows, 0);
    for (uint32_t w = 0; w < c.workers; ++w) {
      auto shard = shard_indices(c.rows, input_context{c.workers, w});
      // TF's Dataset.shard: row i goes to pipeline i % n, in row order.
      CHECK(shard.size()
            == c.rows / c.workers + (w < c.rows % c.workers ? 1 : 0));
      bool in_range = true, owned = true, ascending = true;
      for (size_t k = 0; k < shard.size(); ++k) {
        in_range = in_range && shard[k] < c.rows;
        owned = owned && shard[k] % c.workers == w;
        ascending = ascending && (k == 0 || shard[k] > shard[k - 1]);
        if (shard[k] < c.rows)
          ++seen[shard[k]];
      }
      CHECK(in_range);
      CHECK(owned);
      CHECK(ascending);
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
}

TEST_CASE("shard_indices is empty for a pipeline id out of range",
          "[core][dataset]") {
  CHECK(shard_indices(10, input_context{2, 2}).empty());
  CHECK(shard_indices(10, input_context{0, 0}).empty());
}

TEST_CASE("every batch is full, also across epoch boundaries",
          "[core][dataset]") {
  // Worker 0 of 2 over 23 rows reads 12; batches of 5 straddle epochs.
  auto data = numbered_rows(23);
  batch_iterator it{data, input_context{2, 0}, 5, 7};
  CHECK(it.shard_rows() == 12);
  auto rows = take_rows(it, 12); // 60 rows = 5 epochs
  CHECK(rows.size() == 60);
  // The 60th row was the last of epoch 4; epoch 5 starts on the next call.
  CHECK(it.position().epoch == 4);
  CHECK(it.position().offset == 12);
}

TEST_CASE("each epoch visits every row of the shard exactly once",
          "[core][dataset]") {
  auto data = numbered_rows(23);
  for (uint32_t w = 0; w < 2; ++w) {
    INFO("worker " << w);
    auto shard = shard_indices(23, input_context{2, w});
    for (uint64_t b : {1, 3, 4, 5, 11}) {
      INFO("batch size " << b);
      batch_iterator it{data, input_context{2, w}, b, 3};
      // Enough batches for 4 whole epochs (and a bit).
      auto n = shard.size();
      auto rows = take_rows(it, (4 * n + b - 1) / b);
      for (size_t e = 0; e < 4; ++e) {
        INFO("epoch " << e);
        std::vector<uint32_t> epoch(rows.begin() + e * n,
                                    rows.begin() + (e + 1) * n);
        CHECK(sorted(epoch) == shard);
      }
    }
  }
}

TEST_CASE("the order is reshuffled at every epoch", "[core][dataset]") {
  auto data = numbered_rows(40);
  batch_iterator it{data, input_context{1, 0}, 8, 11};
  auto rows = take_rows(it, 15); // 3 epochs of 40
  std::vector<uint32_t> e0(rows.begin(), rows.begin() + 40);
  std::vector<uint32_t> e1(rows.begin() + 40, rows.begin() + 80);
  std::vector<uint32_t> e2(rows.begin() + 80, rows.end());
  CHECK(e0 != e1);
  CHECK(e1 != e2);
  CHECK(e0 != e2);
  // ... and shuffled, not in dataset order.
  CHECK(e0 != sorted(e0));
}

TEST_CASE("the same seed gives the same order and another seed another",
          "[core][dataset]") {
  auto data = numbered_rows(30);
  batch_iterator a{data, input_context{1, 0}, 4, 5};
  batch_iterator b{data, input_context{1, 0}, 4, 5};
  batch_iterator c{data, input_context{1, 0}, 4, 6};
  auto ra = take_rows(a, 20);
  auto rb = take_rows(b, 20);
  auto rc = take_rows(c, 20);
  CHECK(ra == rb);
  CHECK(ra != rc);
}

TEST_CASE("seeking to a saved position reproduces the batches that followed "
          "it",
          "[core][dataset]") {
  auto data = numbered_rows(23);
  const input_context ctx{2, 1}; // 11 rows
  // Saved after 0 batches, mid-epoch, exactly at an epoch's end (3 x 11 = 33
  // rows in batches of 3) and later.
  for (size_t skip : {0, 1, 2, 4, 11, 17}) {
    INFO("position after " << skip << " batches");
    batch_iterator it{data, ctx, 3, 9};
    take_rows(it, skip);
    auto pos = it.position();
    auto expected = take_rows(it, 10);
    // The same iterator, sent back.
    it.seek(pos);
    CHECK(it.position().epoch == pos.epoch);
    CHECK(it.position().offset == pos.offset);
    CHECK(take_rows(it, 10) == expected);
    // A fresh iterator, as after a restart from a checkpoint.
    batch_iterator fresh{data, ctx, 3, 9};
    fresh.seek(pos);
    CHECK(take_rows(fresh, 10) == expected);
  }
}

TEST_CASE("seeking past the end of the shard throws input_error",
          "[core][dataset]") {
  auto data = numbered_rows(10);
  batch_iterator it{data, input_context{1, 0}, 2, 1};
  CHECK_NOTHROW(it.seek(data_position{3, 10}));
  CHECK_THROWS_AS(it.seek(data_position{0, 11}), input_error);
}

TEST_CASE("a batch size of 0 or larger than the shard throws input_error",
          "[core][dataset]") {
  auto data = numbered_rows(23); // shards of 12 and 11 rows
  CHECK_THROWS_AS(batch_iterator(data, input_context{2, 0}, 0, 1),
                  input_error);
  CHECK_THROWS_WITH(batch_iterator(data, input_context{2, 0}, 0, 1),
                    Catch::Contains("data.batch_size"));
  CHECK_NOTHROW(batch_iterator(data, input_context{2, 0}, 12, 1));
  CHECK_THROWS_AS(batch_iterator(data, input_context{2, 1}, 12, 1),
                  input_error);
  CHECK_THROWS_WITH(batch_iterator(data, input_context{2, 1}, 12, 1),
                    Catch::Contains("data.batch_size")
                      && Catch::Contains("11 rows"));
  CHECK_NOTHROW(batch_iterator(data, input_context{2, 1}, 11, 1));
}

TEST_CASE("the shuffled order is the one of the pre-refactor implementation",
          "[core][dataset]") {
  // Recorded with the batch_iterator of commit f92a80a (before example_batch):
  // 23 rows, worker 1 of 2, batches of 4, seed 12345678901234. A checkpoint's
  // data position must mean the same rows across versions.
  auto data = numbered_rows(23);
  batch_iterator it{data, input_context{2, 1}, 4, 12345678901234ull};
  const std::vector<uint32_t> expected{5,  7,  13, 19, 11, 9,  1,  15,
                                       21, 17, 3,  17, 3,  9,  13, 5,
                                       15, 11, 1,  7,  21, 19, 1,  9};
  CHECK(take_rows(it, 6) == expected);
}

TEST_CASE("a source over a shard held alone gives the batches of a source "
          "over the whole split",
          "[core][dataset]") {
  // What a worker process holds (its shard) must mean the same rows, in the
  // same order, at the same data positions, as the whole split in one
  // process: checkpoints and restarted workers rely on it.
  auto data = numbered_rows(23);
  for (uint32_t workers : {1u, 2u, 3u, 5u}) {
    for (uint32_t w = 0; w < workers; ++w) {
      INFO(workers << " workers, worker " << w);
      const input_context ctx{workers, w};
      auto alone = std::make_shared<dataset>();
      alone->schema = data->schema;
      alone->examples.reset(2, 1);
      for (auto r : shard_indices(23, ctx))
        alone->examples.append_row(data->examples, r);
      CHECK(alone->rows() == shard_size(23, ctx));
      for (uint64_t b : {1, 2, 4}) {
        INFO("batch size " << b);
        batch_iterator whole{data, ctx, b, 12345678901234ull};
        batch_iterator shard{dataset_shard{alone, ctx, 23}, b,
                             12345678901234ull};
        CHECK(shard.shard_rows() == whole.shard_rows());
        CHECK(shard.data().rows() == alone->rows());
        CHECK(take_rows(shard, 17) == take_rows(whole, 17));
        // ... also from a saved position, as after a restart.
        auto pos = whole.position();
        batch_iterator resumed{dataset_shard{alone, ctx, 23}, b,
                               12345678901234ull};
        resumed.seek(pos);
        CHECK(take_rows(resumed, 9) == take_rows(whole, 9));
      }
    }
  }
}

TEST_CASE("the recorded order holds for a shard held alone",
          "[core][dataset]") {
  auto data = numbered_rows(23);
  const input_context ctx{2, 1};
  auto alone = std::make_shared<dataset>();
  alone->schema = data->schema;
  alone->examples.reset(2, 1);
  for (auto r : shard_indices(23, ctx))
    alone->examples.append_row(data->examples, r);
  batch_iterator it{dataset_shard{alone, ctx, 23}, 4, 12345678901234ull};
  const std::vector<uint32_t> expected{5,  7,  13, 19, 11, 9,  1,  15,
                                       21, 17, 3,  17, 3,  9,  13, 5,
                                       15, 11, 1,  7,  21, 19, 1,  9};
  CHECK(take_rows(it, 6) == expected);
}

TEST_CASE("a shard that does not hold its rows, or is smaller than a batch, "
          "is an input error",
          "[core][dataset]") {
  auto data = numbered_rows(23); // 23 rows as if they were a shard
  // Worker 0 of 2 over 23 rows holds 12.
  CHECK_THROWS_WITH((batch_iterator{dataset_shard{data, {2, 0}, 23}, 4, 1}),
                    Catch::Contains("holds 23 rows")
                      && Catch::Contains("give it 12"));
  CHECK_NOTHROW(batch_iterator{dataset_shard{data, {2, 0}, 46}, 23, 1});
  CHECK_THROWS_WITH((batch_iterator{dataset_shard{data, {2, 0}, 46}, 24, 1}),
                    Catch::Contains("data.batch_size: 24")
                      && Catch::Contains("23 rows of 46 over 2 workers"));
}

TEST_CASE("shard_size counts the rows shard_indices names",
          "[core][dataset]") {
  for (uint64_t rows : {0, 1, 2, 7, 23, 60000})
    for (uint32_t n : {0u, 1u, 2u, 3u, 7u})
      for (uint32_t id = 0; id <= n; ++id) {
        INFO(rows << " rows, pipeline " << id << " of " << n);
        CHECK(shard_size(rows, input_context{n, id})
              == shard_indices(rows, input_context{n, id}).size());
      }
}

TEST_CASE("a batch refilled every step keeps its memory once it has grown",
          "[core][dataset]") {
  auto data = numbered_rows(50);
  batch_iterator it{data, input_context{1, 0}, 8, 2};
  example_batch batch;
  // Warm up: the largest batch of tags is 8 rows x 2 keys.
  for (int k = 0; k < 20; ++k)
    it.next(batch);
  batch.fields[0].keys.reserve(16);
  batch.fields[0].values.reserve(16);
  const auto* dense = batch.dense.data();
  const auto* keys = batch.fields[0].keys.data();
  const auto* values = batch.fields[0].values.data();
  const auto* offsets = batch.fields[0].offsets.data();
  const auto* labels = batch.labels.data();
  for (int k = 0; k < 50; ++k) {
    it.next(batch);
    REQUIRE(batch.dense.data() == dense);
    REQUIRE(batch.fields[0].keys.data() == keys);
    REQUIRE(batch.fields[0].values.data() == values);
    REQUIRE(batch.fields[0].offsets.data() == offsets);
    REQUIRE(batch.labels.data() == labels);
  }
}

TEST_CASE("load_idx_dataset gives dense multiclass examples without fields",
          "[core][dataset]") {
  actorps::test::temp_dir dir{"dataset_idx"};
  idx_array images{{3, 2, 2}, {0, 51, 102, 255, 1, 2, 3, 4, 5, 6, 7, 8}};
  idx_array labels{{3}, {2, 0, 9}};
  write_idx_gz(dir.file("img.gz"), images);
  write_idx_gz(dir.file("lab.gz"), labels);
  auto ds = load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 10);
  CHECK(ds.schema.dense_dim == 4);
  CHECK(ds.schema.fields.empty());
  CHECK(ds.schema.labels == label_kind::multiclass);
  CHECK(ds.schema.classes == 10);
  CHECK(ds.rows() == 3);
  CHECK_NOTHROW(ds.examples.check("idx"));
  CHECK(ds.examples.fields.empty());
  example_batch first;
  first.reset(4, 0);
  first.append_row(ds.examples, 0);
  CHECK(first.dense[1] == Approx(0.2f));
  CHECK(first.dense[3] == 1.0f);
  CHECK(ds.examples.labels == std::vector<int32_t>{2, 0, 9});
  auto two = load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 10, 2);
  CHECK(two.rows() == 2);
  CHECK(two.examples.dense_bytes.size() == 8);
  CHECK_THROWS_AS(load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 5),
                  input_error);
}

TEST_CASE("example_batch::check names the first broken invariant",
          "[core][dataset]") {
  auto good = numbered_rows(4)->examples;
  CHECK_NOTHROW(good.check("b"));
  auto bad_dense = good;
  bad_dense.dense.pop_back();
  CHECK_THROWS_WITH(bad_dense.check("b"), Catch::StartsWith("b: 7 dense"));
  auto bad_labels = good;
  bad_labels.labels.push_back(0);
  CHECK_THROWS_WITH(bad_labels.check("b"), Catch::Contains("5 labels"));
  auto bad_offsets = good;
  bad_offsets.fields[0].offsets[2] = 9;
  CHECK_THROWS_WITH(bad_offsets.check("b"), Catch::Contains("decrease"));
  auto bad_end = good;
  bad_end.fields[0].keys.push_back(1);
  CHECK_THROWS_WITH(bad_end.check("b"), Catch::Contains("keys"));
  auto bad_values = good;
  bad_values.fields[0].values.pop_back();
  CHECK_THROWS_WITH(bad_values.check("b"), Catch::Contains("values"));
  // Dense features as bytes: one form, rows x dense_dim of them.
  auto as_bytes = good;
  as_bytes.dense.clear();
  as_bytes.dense_bytes.assign(8, 1);
  CHECK_NOTHROW(as_bytes.check("b"));
  auto both = as_bytes;
  both.dense = good.dense;
  CHECK_THROWS_WITH(both.check("b"), Catch::StartsWith("b: 8 dense values as "
                                                       "floats and 8 as "
                                                       "bytes"));
  auto short_bytes = as_bytes;
  short_bytes.dense_bytes.pop_back();
  CHECK_THROWS_WITH(short_bytes.check("b"), Catch::StartsWith("b: 7 dense "
                                                              "bytes"));
}

TEST_CASE("a row of byte features is appended as floats byte x byte_scale, "
          "with its fields and label",
          "[core][dataset]") {
  auto src = numbered_rows(4)->examples;
  src.dense.clear();
  src.dense_bytes = {0, 1, 2, 255, 128, 7, 9, 10};
  src.byte_scale = 0.5f;
  REQUIRE_NOTHROW(src.check("src"));
  example_batch out;
  out.reset(2, 1);
  out.append_row(src, 1);
  out.append_row(src, 2);
  CHECK(out.dense == std::vector<float>{1.0f, 127.5f, 64.0f, 3.5f});
  CHECK(out.dense_bytes.empty());
  CHECK(out.labels == std::vector<int32_t>{1, 2});
  CHECK(out.fields[0].keys == std::vector<uint64_t>{10, 20, 21});
  CHECK_NOTHROW(out.check("out"));
  // reset() returns a batch to floats.
  src.reset(2, 1);
  CHECK(src.dense_bytes.empty());
  CHECK(src.byte_scale == 1.0f);
}
