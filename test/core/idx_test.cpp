#include "core/idx.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "test/temp_dir.hpp"

#include "core/dataset.hpp"
#include "core/error.hpp"

using namespace actorps;
namespace fs = std::filesystem;

namespace {

/// A fresh directory for one test case (test/temp_dir.hpp).
struct temp_dir : test::temp_dir {
  temp_dir() : test::temp_dir("actorps_idx_test") {}
};

using bytes = std::vector<uint8_t>;

void write_bytes(const std::string& path, const bytes& data) {
  std::ofstream out{path, std::ios::binary};
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size()));
  REQUIRE(out.good());
}

bytes read_bytes(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  return bytes{std::istreambuf_iterator<char>{in}, {}};
}

/// An uncompressed IDX file: unsigned-byte magic, then big-endian dims.
bytes plain_idx(const std::vector<uint32_t>& dims, const bytes& data) {
  bytes result{0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (auto d : dims)
    for (int shift = 24; shift >= 0; shift -= 8)
      result.push_back(static_cast<uint8_t>(d >> shift));
  result.insert(result.end(), data.begin(), data.end());
  return result;
}

idx_array make_array(std::vector<uint32_t> dims) {
  idx_array arr;
  arr.dims = std::move(dims);
  uint64_t n = 1;
  for (auto d : arr.dims)
    n *= d;
  for (uint64_t i = 0; i < n; ++i)
    arr.data.push_back(static_cast<uint8_t>((i * 37 + 11) % 256));
  return arr;
}

bytes random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng{seed};
  std::uniform_int_distribution<int> dist{0, 255};
  bytes result(n);
  for (auto& b : result)
    b = static_cast<uint8_t>(dist(rng));
  return result;
}

/// The dense features of every row of `ex` as a batch gets them
/// (example_batch::append_row): floats, whatever form `ex` holds them in.
std::vector<float> batch_floats(const example_batch& ex) {
  example_batch out;
  out.reset(ex.dense_dim, ex.fields.size());
  for (uint64_t r = 0; r < ex.rows; ++r)
    out.append_row(ex, r);
  return out.dense;
}

/// Checks that read_idx(path) throws input_error naming the file and saying
/// `what`.
void check_rejected(const std::string& path, const std::string& what,
                    uint64_t max_items = 0) {
  INFO("file " << path);
  CHECK_THROWS_AS(read_idx(path, max_items), input_error);
  CHECK_THROWS_WITH(read_idx(path, max_items),
                    Catch::Contains(path) && Catch::Contains(what));
}

} // namespace

TEST_CASE("an IDX file written with write_idx_gz reads back unchanged",
          "[core][idx]") {
  temp_dir dir;
  for (auto dims : std::vector<std::vector<uint32_t>>{
         {7}, {3, 4}, {5, 2, 3}, {2, 3, 2, 2}, {300, 28, 28}}) {
    auto arr = make_array(dims);
    auto path = dir.file("a.idx.gz");
    write_idx_gz(path, arr);
    // The file is gzip-compressed.
    auto raw = read_bytes(path);
    REQUIRE(raw.size() >= 2);
    CHECK(raw[0] == 0x1f);
    CHECK(raw[1] == 0x8b);
    auto back = read_idx(path);
    CHECK(back.dims == arr.dims);
    CHECK(back.data == arr.data);
    CHECK(back.items() == dims[0]);
    CHECK(back.item_size() == arr.data.size() / dims[0]);
  }
}

TEST_CASE("read_idx keeps at most max_items items", "[core][idx]") {
  temp_dir dir;
  auto arr = make_array({5, 2, 3});
  auto path = dir.file("a.idx.gz");
  write_idx_gz(path, arr);
  auto two = read_idx(path, 2);
  CHECK(two.dims == std::vector<uint32_t>{2, 2, 3});
  CHECK(two.data == bytes(arr.data.begin(), arr.data.begin() + 12));
  CHECK(read_idx(path, 5).dims == arr.dims);
  CHECK(read_idx(path, 9).dims == arr.dims);
  CHECK(read_idx(path, 0).data == arr.data);
}

TEST_CASE("read_idx reads uncompressed IDX files too", "[core][idx]") {
  temp_dir dir;
  auto path = dir.file("plain.idx");
  write_bytes(path, plain_idx({3, 2}, {1, 2, 3, 4, 5, 255}));
  auto arr = read_idx(path);
  CHECK(arr.dims == std::vector<uint32_t>{3, 2});
  CHECK(arr.data == bytes{1, 2, 3, 4, 5, 255});
}

TEST_CASE("unusable IDX files throw input_error naming the file",
          "[core][idx]") {
  temp_dir dir;

  SECTION("a missing file") {
    check_rejected(dir.file("no-such-file.gz"), "cannot open");
  }

  SECTION("a gzip file cut in half") {
    auto path = dir.file("cut.gz");
    // Incompressible data, so that half the file is well short of the data.
    idx_array arr;
    arr.dims = {64, 16};
    arr.data = random_bytes(64 * 16, 1);
    write_idx_gz(path, arr);
    auto size = fs::file_size(path);
    fs::resize_file(path, size / 2);
    check_rejected(path, "truncated");
    // ... also when fewer items are kept than are in the file.
    check_rejected(path, "truncated", 1);
  }

  SECTION("a gzip file without its trailer") {
    auto path = dir.file("no-trailer.gz");
    write_idx_gz(path, make_array({6, 5}));
    // The last 8 bytes are the CRC-32 and the length: the data is complete,
    // the stream is not.
    fs::resize_file(path, fs::file_size(path) - 8);
    check_rejected(path, "truncated");
  }

  SECTION("a gzip file whose checksum does not match its data") {
    auto path = dir.file("bad-crc.gz");
    write_idx_gz(path, make_array({6, 5}));
    auto raw = read_bytes(path);
    raw[raw.size() - 8] ^= 0xff; // first byte of the CRC-32
    write_bytes(path, raw);
    check_rejected(path, "corrupt");
  }

  SECTION("a plain file with a bad magic number") {
    auto path = dir.file("bad-magic.idx");
    auto raw = plain_idx({2, 2}, {1, 2, 3, 4});
    raw[0] = 0x12;
    raw[1] = 0x34;
    write_bytes(path, raw);
    check_rejected(path, "not an IDX file");
  }

  SECTION("an IDX file of another element type") {
    auto path = dir.file("floats.idx");
    auto raw = plain_idx({1}, {0, 0, 0x80, 0x3f});
    raw[2] = 0x0D; // float
    write_bytes(path, raw);
    check_rejected(path, "element type");
  }

  SECTION("an IDX header of rank 0 or 5") {
    auto path = dir.file("rank.idx");
    write_bytes(path, bytes{0, 0, 0x08, 0});
    check_rejected(path, "rank 0");
    write_bytes(path, plain_idx({1, 1, 1, 1, 1}, {7}));
    check_rejected(path, "rank 5");
  }

  SECTION("a dimension of 0") {
    auto path = dir.file("zero.idx");
    write_bytes(path, plain_idx({3, 0}, {}));
    check_rejected(path, "dimension 1 is 0");
  }

  SECTION("a header that ends inside the dimensions") {
    auto path = dir.file("short-header.idx");
    auto raw = plain_idx({3, 2}, {});
    raw.resize(raw.size() - 2);
    write_bytes(path, raw);
    check_rejected(path, "truncated");
  }

  SECTION("a header promising more items than the data holds") {
    auto path = dir.file("short.idx");
    // 5 items of 2 bytes promised, 3 items there.
    write_bytes(path, plain_idx({5, 2}, {1, 2, 3, 4, 5, 6}));
    check_rejected(path, "truncated");
    // The header is checked against the data even when fewer items are kept.
    check_rejected(path, "truncated", 2);
    check_rejected(path, "truncated", 4);
  }

  SECTION("a plain file with bytes after the data the header promises") {
    auto path = dir.file("long.idx");
    write_bytes(path, plain_idx({2, 2}, {1, 2, 3, 4, 5}));
    check_rejected(path, "more bytes than the header promises");
    check_rejected(path, "more bytes than the header promises", 1);
  }

  SECTION("a header promising an absurd amount of data") {
    auto path = dir.file("huge.idx");
    write_bytes(path, plain_idx({0xffffffffu, 0xffffffffu}, {1, 2, 3}));
    check_rejected(path, "16 GiB");
  }

  SECTION("random bytes") {
    auto path = dir.file("noise.bin");
    for (uint32_t seed = 1; seed <= 5; ++seed) {
      write_bytes(path, random_bytes(4096, seed));
      check_rejected(path, "");
    }
  }

  SECTION("a gzip header followed by random bytes") {
    auto path = dir.file("noise.gz");
    write_idx_gz(path, make_array({4, 4}));
    auto raw = read_bytes(path);
    raw.resize(10); // the gzip header alone
    auto noise = random_bytes(4096, 42);
    raw.insert(raw.end(), noise.begin(), noise.end());
    write_bytes(path, raw);
    check_rejected(path, "");
  }
}

TEST_CASE("write_idx_gz into a missing folder throws input_error naming the "
          "file",
          "[core][idx]") {
  temp_dir dir;
  auto path = dir.file("no-such-dir/a.gz");
  CHECK_THROWS_AS(write_idx_gz(path, make_array({2})), input_error);
  CHECK_THROWS_WITH(write_idx_gz(path, make_array({2})),
                    Catch::Contains(path));
}

// -- load_idx_dataset ---------------------------------------------------------

TEST_CASE("load_idx_dataset scales pixels to [0, 1] and keeps the labels",
          "[core][idx][dataset]") {
  temp_dir dir;
  idx_array images;
  images.dims = {3, 2, 2};
  images.data = {0, 255, 51, 102, 255, 255, 0, 0, 1, 2, 3, 254};
  idx_array labels;
  labels.dims = {3};
  labels.data = {0, 2, 1};
  write_idx_gz(dir.file("img.gz"), images);
  write_idx_gz(dir.file("lab.gz"), labels);
  auto data = load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 3);
  CHECK(data.rows() == 3);
  CHECK(data.schema.dense_dim == 4);
  CHECK(data.schema.classes == 3);
  CHECK(data.examples.labels == std::vector<int32_t>{0, 2, 1});
  CHECK_NOTHROW(data.examples.check("idx"));
  auto dense = batch_floats(data.examples);
  REQUIRE(dense.size() == 12);
  CHECK(dense[0] == 0.0f);
  CHECK(dense[1] == 1.0f);
  CHECK(dense[2] == Approx(0.2f));
  CHECK(dense[3] == Approx(0.4f));
  CHECK(dense[11] == Approx(254.0 / 255.0));
  for (size_t i = 0; i < dense.size(); ++i) {
    INFO("feature " << i);
    CHECK(dense[i] >= 0.0f);
    CHECK(dense[i] <= 1.0f);
  }
  // With a limit, the first rows only.
  auto two = load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 3, 2);
  CHECK(two.rows() == 2);
  CHECK(batch_floats(two.examples).size() == 8);
  CHECK(two.examples.labels == std::vector<int32_t>{0, 2});
}

TEST_CASE("load_idx_dataset holds the pixels as the file's bytes, with no "
          "float copy",
          "[core][idx][dataset]") {
  // What the main job keeps in memory for Fashion-MNIST: one byte per pixel
  // (47 MB for the training split), not four (188 MB).
  temp_dir dir;
  idx_array images;
  images.dims = {5, 3, 4};
  images.data = random_bytes(5 * 12, 17);
  idx_array labels;
  labels.dims = {5};
  labels.data = {0, 1, 2, 1, 0};
  write_idx_gz(dir.file("img.gz"), images);
  write_idx_gz(dir.file("lab.gz"), labels);
  for (uint64_t limit : {0, 3}) {
    INFO("limit " << limit);
    auto data = load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 3,
                                 limit);
    auto rows = limit == 0 ? 5 : limit;
    CHECK(data.examples.dense.empty());
    CHECK(data.examples.dense_bytes
          == bytes(images.data.begin(), images.data.begin() + rows * 12));
    CHECK(data.examples.byte_scale == 1.0f / 255.0f);
    CHECK_NOTHROW(data.examples.check("idx"));
  }
  // A shard likewise: its own rows' bytes only.
  auto got = load_idx_shards(dir.file("img.gz"), dir.file("lab.gz"), 3, 0, 2,
                             {1});
  REQUIRE(got.shards.size() == 1);
  const auto& ex = got.shards[0].rows->examples;
  CHECK(ex.dense.empty());
  bytes expected(images.data.begin() + 12, images.data.begin() + 24);
  expected.insert(expected.end(), images.data.begin() + 36,
                  images.data.begin() + 48);
  CHECK(ex.dense_bytes == expected);
}

TEST_CASE("the batches of an IDX dataset hold exactly the floats the loader "
          "that held floats made",
          "[core][idx][dataset]") {
  // One image holding every byte value; the loader that kept floats stored
  // static_cast<float>(byte) * (1.0f / 255.0f). Compared bit for bit, so the
  // losses of a job with a fixed seed stay what they were.
  temp_dir dir;
  idx_array images;
  images.dims = {2, 16, 16};
  for (int v = 0; v < 256; ++v)
    images.data.push_back(static_cast<uint8_t>(v));
  for (int v = 255; v >= 0; --v)
    images.data.push_back(static_cast<uint8_t>(v));
  idx_array labels;
  labels.dims = {2};
  labels.data = {1, 0};
  write_idx_gz(dir.file("img.gz"), images);
  write_idx_gz(dir.file("lab.gz"), labels);
  auto data = std::make_shared<const dataset>(
    load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 2));
  constexpr float scale = 1.0f / 255.0f;
  auto dense = batch_floats(data->examples);
  REQUIRE(dense.size() == 512);
  for (size_t i = 0; i < dense.size(); ++i) {
    INFO("pixel " << i << ", byte " << int{images.data[i]});
    CHECK(dense[i] == static_cast<float>(images.data[i]) * scale);
  }
  // The same through a worker's batches (batch_iterator).
  batch_iterator it{data, input_context{1, 0}, 2, 7};
  example_batch batch;
  it.next(batch);
  REQUIRE(batch.dense.size() == 512);
  CHECK(batch.dense_bytes.empty());
  for (uint64_t r = 0; r < 2; ++r) {
    auto row = batch.labels[r] == 1 ? 0 : 1; // label 1 is image 0
    for (uint64_t d = 0; d < 256; ++d)
      CHECK(batch.dense[r * 256 + d]
            == static_cast<float>(images.data[row * 256 + d]) * scale);
  }
}

TEST_CASE("load_idx_dataset rejects mismatched or out-of-range files",
          "[core][idx][dataset]") {
  temp_dir dir;
  idx_array images;
  images.dims = {3, 2, 2};
  images.data = bytes(12, 7);
  write_idx_gz(dir.file("img.gz"), images);

  SECTION("images and labels of different counts") {
    idx_array labels;
    labels.dims = {2};
    labels.data = {0, 1};
    write_idx_gz(dir.file("lab.gz"), labels);
    CHECK_THROWS_AS(
      load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 3),
      input_error);
    CHECK_THROWS_WITH(
      load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 3),
      Catch::Contains(dir.file("img.gz")) && Catch::Contains("3 images")
        && Catch::Contains(dir.file("lab.gz")) && Catch::Contains("2 labels"));
  }

  SECTION("a label >= classes") {
    idx_array labels;
    labels.dims = {3};
    labels.data = {0, 3, 1};
    write_idx_gz(dir.file("lab.gz"), labels);
    CHECK_THROWS_AS(
      load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 3),
      input_error);
    CHECK_THROWS_WITH(
      load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 3),
      Catch::Contains(dir.file("lab.gz")) && Catch::Contains("label 3"));
    // With 4 classes the same file is fine.
    CHECK(load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 4).rows()
          == 3);
  }

  SECTION("labels of rank 2 or images of rank 1") {
    idx_array labels;
    labels.dims = {3, 1};
    labels.data = {0, 1, 2};
    write_idx_gz(dir.file("lab2.gz"), labels);
    CHECK_THROWS_WITH(
      load_idx_dataset(dir.file("img.gz"), dir.file("lab2.gz"), 3),
      Catch::Contains(dir.file("lab2.gz")) && Catch::Contains("rank 2"));
    labels.dims = {3};
    write_idx_gz(dir.file("lab.gz"), labels);
    CHECK_THROWS_WITH(
      load_idx_dataset(dir.file("lab.gz"), dir.file("lab.gz"), 3),
      Catch::Contains(dir.file("lab.gz")) && Catch::Contains("rank 1"));
  }

  SECTION("a missing label file") {
    CHECK_THROWS_WITH(
      load_idx_dataset(dir.file("img.gz"), dir.file("missing.gz"), 3),
      Catch::Contains(dir.file("missing.gz")));
  }
}

TEST_CASE("load_idx_shards keeps only the requested shards, each row as the "
          "whole split has it",
          "[core][idx][dataset]") {
  temp_dir dir;
  // 11 items of 3 x 5 pixels (more than one 64 KiB chunk would be better, but
  // chunks are exercised by Fashion-MNIST itself in data_registry_test).
  idx_array images;
  images.dims = {11, 3, 5};
  images.data = random_bytes(11 * 15, 3);
  idx_array labels;
  labels.dims = {11};
  for (uint8_t i = 0; i < 11; ++i)
    labels.data.push_back(i % 4);
  write_idx_gz(dir.file("img.gz"), images);
  write_idx_gz(dir.file("lab.gz"), labels);
  for (uint64_t limit : {0, 1, 7, 11, 20}) {
    auto whole = load_idx_dataset(dir.file("img.gz"), dir.file("lab.gz"), 4,
                                  limit);
    for (uint32_t n : {1u, 2u, 3u, 4u}) {
      INFO("limit " << limit << ", " << n << " pipelines");
      // One shard alone, and all shards in one pass (in reverse order).
      std::vector<uint32_t> all;
      for (uint32_t id = n; id-- > 0;)
        all.push_back(id);
      for (auto ids : {std::vector<uint32_t>{n - 1}, all}) {
        auto got = load_idx_shards(dir.file("img.gz"), dir.file("lab.gz"), 4,
                                   limit, n, ids);
        CHECK(got.split_rows == whole.rows());
        REQUIRE(got.shards.size() == ids.size());
        for (size_t k = 0; k < ids.size(); ++k) {
          auto& sh = got.shards[k];
          CHECK(sh.ctx.num_input_pipelines == n);
          CHECK(sh.ctx.input_pipeline_id == ids[k]);
          CHECK(sh.split_rows == whole.rows());
          CHECK(sh.rows->schema.dense_dim == 15);
          CHECK_NOTHROW(sh.rows->examples.check("shard"));
          auto rows = shard_indices(whole.rows(), sh.ctx);
          REQUIRE(sh.rows->rows() == rows.size());
          for (size_t j = 0; j < rows.size(); ++j) {
            auto r = rows[j];
            CHECK(sh.rows->examples.labels[j] == whole.examples.labels[r]);
            CHECK(std::equal(sh.rows->examples.dense_bytes.begin() + j * 15,
                             sh.rows->examples.dense_bytes.begin()
                               + (j + 1) * 15,
                             whole.examples.dense_bytes.begin() + r * 15));
          }
        }
      }
    }
  }
  // No shards: the files are read and checked, nothing is kept.
  auto none = load_idx_shards(dir.file("img.gz"), dir.file("lab.gz"), 4, 0, 1,
                              {});
  CHECK(none.split_rows == 11);
  CHECK(none.shards.empty());
  CHECK_THROWS_WITH(load_idx_shards(dir.file("img.gz"), dir.file("lab.gz"), 3,
                                    0, 1, {}),
                    Catch::Contains("label 3"));
  CHECK_THROWS_AS(load_idx_shards(dir.file("img.gz"), dir.file("lab.gz"), 4,
                                  0, 2, {2}),
                  std::invalid_argument);
  CHECK_THROWS_AS(load_idx_shards(dir.file("img.gz"), dir.file("lab.gz"), 4,
                                  0, 2, {1, 1}),
                  std::invalid_argument);
}

TEST_CASE("load_idx_shards checks every row of the split, also those of "
          "other shards",
          "[core][idx][dataset]") {
  temp_dir dir;
  idx_array images;
  images.dims = {4000, 28, 28}; // several 64 KiB chunks
  images.data = random_bytes(4000 * 784, 5);
  idx_array labels;
  labels.dims = {4000};
  labels.data.assign(4000, 1);
  write_idx_gz(dir.file("img.gz"), images);
  write_idx_gz(dir.file("lab.gz"), labels);
  auto size = fs::file_size(dir.file("img.gz"));
  fs::resize_file(dir.file("img.gz"), size * 3 / 4);
  CHECK_THROWS_WITH(load_idx_shards(dir.file("img.gz"), dir.file("lab.gz"), 2,
                                    0, 4, {0}),
                    Catch::Contains(dir.file("img.gz"))
                      && Catch::Contains("truncated"));
}

TEST_CASE("idx_reader passes the kept items in order, in chunks of at most "
          "64 KiB",
          "[core][idx]") {
  temp_dir dir;
  idx_array arr;
  arr.dims = {300, 1000}; // 65 items per chunk
  arr.data = random_bytes(300 * 1000, 9);
  write_idx_gz(dir.file("a.gz"), arr);
  idx_reader in{dir.file("a.gz")};
  CHECK(in.items() == 300);
  CHECK(in.item_size() == 1000);
  CHECK(in.dims() == arr.dims);
  bytes seen;
  uint64_t next = 0;
  in.read_items(200, [&](uint64_t first, uint64_t count, const uint8_t* p) {
    CHECK(first == next);
    CHECK(count >= 1);
    CHECK(count * 1000 <= 65536);
    next += count;
    seen.insert(seen.end(), p, p + count * 1000);
  });
  CHECK(next == 200);
  CHECK(seen == bytes(arr.data.begin(), arr.data.begin() + 200 * 1000));
}

TEST_CASE("load_fashion_mnist rejects unknown splits", "[core][idx][dataset]") {
  CHECK_THROWS_AS(load_fashion_mnist("/nonexistent", "test"), input_error);
  CHECK_THROWS_WITH(load_fashion_mnist("/nonexistent", "train"),
                    Catch::Contains("/nonexistent/train-images-idx3-ubyte.gz"));
}
