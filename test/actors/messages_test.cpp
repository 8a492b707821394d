// The wire form of messages: a pull reply sent from the server's snapshot
// of its dense values (no copy) is the same bytes as one with a copy.

#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"

#include "actors/messages.hpp"

using namespace actorps;

namespace {

pull_reply reply_with_rows() {
  pull_reply reply;
  reply.clock = 7;
  table_rows rows;
  rows.shard = 3;
  rows.values.values = {0.25f, -1.5f};
  reply.tables.push_back(rows);
  return reply;
}

std::vector<char> bytes_of(pull_reply& x) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  REQUIRE(!sink(x));
  return buf;
}

} // namespace

TEST_CASE("a pull reply with shared values is serialised as the same bytes "
          "as one with copied values, and arrives with them as values",
          "[actors][messages]") {
  std::vector<float> dense{1.0f, -2.0f, 3.5f, 0.0f, 1e-3f};
  auto copied = reply_with_rows();
  copied.values.values.assign(dense.begin(), dense.end());
  auto shared = reply_with_rows();
  shared.shared_values = std::make_shared<const std::vector<float>>(dense);
  shared.shared_count = dense.size();
  auto expected = bytes_of(copied);
  auto bytes = bytes_of(shared);
  CHECK(bytes == expected);
  pull_reply got;
  caf::binary_deserializer source{nullptr, bytes};
  REQUIRE(!source(got));
  CHECK(got.clock == 7);
  CHECK(std::vector<float>(got.values.values.begin(), got.values.values.end())
        == dense);
  CHECK(got.shared_values == nullptr);
  REQUIRE(got.tables.size() == 1);
  CHECK(got.tables[0].shard == 3);
  CHECK(got.tables[0].values.values.size() == 2);
}

TEST_CASE("a pull reply with a slice of shared values is serialised as the "
          "same bytes as one with that slice copied",
          "[actors][messages]") {
  std::vector<float> dense{1.0f, -2.0f, 3.5f, 0.0f, 1e-3f};
  auto copied = reply_with_rows();
  copied.values.values.assign(dense.begin() + 1, dense.begin() + 4);
  auto shared = reply_with_rows();
  shared.shared_values = std::make_shared<const std::vector<float>>(dense);
  shared.shared_offset = 1;
  shared.shared_count = 3;
  auto bytes = bytes_of(shared);
  CHECK(bytes == bytes_of(copied));
  pull_reply got;
  caf::binary_deserializer source{nullptr, bytes};
  REQUIRE(!source(got));
  CHECK(std::vector<float>(got.values.values.begin(), got.values.values.end())
        == std::vector<float>{-2.0f, 3.5f, 0.0f});
}
