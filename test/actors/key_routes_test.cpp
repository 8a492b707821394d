#include "actors/key_routes.hpp"

#include <algorithm>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

using namespace actorps;

namespace {

/// A dense variable (shard 0, on server 0), a table of 30 keys split mod 3
/// (shards 1, 2, 3 on servers 1, 0, 1) and a table of unbounded keys split
/// by hash (shards 4, 5, 6 on servers 0, 1, 0).
placement test_placement() {
  partitioner_config three{partitioner_config::kind::fixed_shards, 3};
  return place_variables({variable_def::dense("bias", 1, 2),
                          variable_def::table("emb", 30, 2, 0.1f),
                          variable_def::table("ids", 0, 3, 0.1f)},
                         three, 2, table_partition::mod);
}

table_lookup lookup(uint32_t variable, uint64_t dim,
                    std::vector<uint64_t> occurrences) {
  table_lookup t;
  t.variable = variable;
  t.dim = dim;
  t.occurrences = std::move(occurrences);
  t.deduplicate();
  return t;
}

/// What a fake server holds for `key`: element j is 10 key + j (+ 0.5 in
/// the gradient test, to tell them apart).
std::vector<float> row_of_key(uint64_t key, uint64_t dim, float offset = 0) {
  std::vector<float> row(dim);
  for (uint64_t j = 0; j < dim; ++j)
    row[j] = static_cast<float>(10 * key + j) + offset;
  return row;
}

uint64_t dim_of(const placement& pl, uint32_t shard) {
  return pl.variables[pl.shards[shard].variable].cols;
}

/// A server's answer to the table part of a pull request.
std::vector<table_rows> serve(const placement& pl,
                              const std::vector<table_rows>& request) {
  std::vector<table_rows> reply(request.size());
  for (size_t i = 0; i < request.size(); ++i) {
    reply[i].shard = request[i].shard;
    for (auto key : request[i].keys.keys) {
      auto row = row_of_key(key, dim_of(pl, request[i].shard));
      reply[i].values.values.insert(reply[i].values.values.end(), row.begin(),
                                    row.end());
    }
  }
  return reply;
}

/// Pulls every server's rows through `routes` from fake servers.
void pull_all(const placement& pl, const key_routes& routes,
              std::vector<table_lookup>& tables) {
  std::vector<table_rows> request;
  for (uint32_t p = 0; p < 2; ++p) {
    routes.fill_pull(p, request);
    auto err = routes.scatter_pull(p, serve(pl, request), tables);
    REQUIRE(!err);
  }
}

/// Whether every occurrence reads its key's row.
void check_rows(const std::vector<table_lookup>& tables) {
  for (auto& t : tables)
    for (size_t i = 0; i < t.occurrences.size(); ++i) {
      std::vector<float> got(t.row_of(i), t.row_of(i) + t.dim);
      CHECK(got == row_of_key(t.occurrences[i], t.dim));
    }
}

/// Checks that the requests of both servers hold each unique key of each
/// table exactly once, on the shard and server the placement names, in the
/// lookup's order, with one entry per shard.
void check_routes(const placement& pl, const key_routes& routes,
                  const std::vector<table_lookup>& tables) {
  std::vector<std::vector<uint64_t>> routed(tables.size());
  for (uint32_t p = 0; p < 2; ++p) {
    std::vector<table_rows> request;
    routes.fill_pull(p, request);
    std::set<uint32_t> shards;
    for (auto& t : request) {
      CHECK(shards.insert(t.shard).second);
      CHECK(pl.shards[t.shard].ps == p);
      CHECK(t.values.values.empty());
      CHECK_FALSE(t.keys.keys.empty());
      auto v = pl.shards[t.shard].variable;
      auto it = std::find_if(tables.begin(), tables.end(),
                             [&](auto& x) { return x.variable == v; });
      REQUIRE(it != tables.end());
      auto& keys = it->keys;
      size_t last = 0;
      for (auto key : t.keys.keys) {
        CHECK(pl.shard_id_of_key(v, key) == t.shard);
        auto pos = static_cast<size_t>(
          std::find(keys.begin(), keys.end(), key) - keys.begin());
        REQUIRE(pos < keys.size());
        CHECK(pos >= last); // lookup order
        last = pos;
        routed[static_cast<size_t>(it - tables.begin())].push_back(key);
      }
    }
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    auto expected = tables[i].keys;
    std::sort(expected.begin(), expected.end());
    std::sort(routed[i].begin(), routed[i].end());
    CHECK(routed[i] == expected);
  }
}

} // namespace

TEST_CASE("the test placement puts table shards on both servers",
          "[actors][key_routes]") {
  auto pl = test_placement();
  REQUIRE(pl.shards.size() == 7);
  CHECK(pl.shards[0].kind == variable_kind::dense);
  std::vector<uint32_t> servers;
  for (auto& s : pl.shards)
    servers.push_back(s.ps);
  CHECK(servers == std::vector<uint32_t>{0, 1, 0, 1, 0, 1, 0});
  CHECK(pl.variable_shards[1] == std::vector<uint32_t>{1, 2, 3});
}

TEST_CASE("route groups each table's unique keys by shard and server",
          "[actors][key_routes]") {
  auto pl = test_placement();
  key_routes routes{pl, 2};
  std::vector<table_lookup> tables{lookup(1, 2, {4, 7, 4, 5, 29, 0}),
                                   lookup(2, 3, {100, 200, 100, 300, 400})};
  routes.route(pl, tables);
  // emb: key % 3 picks the shard: 4, 7 -> shard 2 (server 0); 5, 29 ->
  // shard 3 and 0 -> shard 1 (server 1). Entries in order of first key.
  std::vector<table_rows> request;
  routes.fill_pull(0, request);
  REQUIRE_FALSE(request.empty());
  CHECK(request[0].shard == 2);
  CHECK(request[0].keys.keys == std::vector<uint64_t>{4, 7});
  routes.fill_pull(1, request);
  REQUIRE(request.size() >= 2);
  CHECK(request[0].shard == 3);
  CHECK(request[0].keys.keys == std::vector<uint64_t>{5, 29});
  CHECK(request[1].shard == 1);
  CHECK(request[1].keys.keys == std::vector<uint64_t>{0});
  // ids: by hash, wherever the placement says.
  check_routes(pl, routes, tables);
}

TEST_CASE("scatter_pull puts each row at its key's unique position and "
          "fill_push carries each key's row gradient",
          "[actors][key_routes]") {
  auto pl = test_placement();
  key_routes routes{pl, 2};
  std::vector<table_lookup> tables{lookup(1, 2, {4, 7, 4, 5, 29, 0}),
                                   lookup(2, 3, {100, 200, 100, 300, 400})};
  routes.route(pl, tables);
  pull_all(pl, routes, tables);
  check_rows(tables);
  for (auto& t : tables)
    for (size_t u = 0; u < t.keys.size(); ++u) {
      auto g = row_of_key(t.keys[u], t.dim, 0.5f);
      std::copy(g.begin(), g.end(), t.grad.begin() + u * t.dim);
    }
  std::vector<table_rows> request;
  std::vector<table_rows> push;
  size_t pushed = 0;
  for (uint32_t p = 0; p < 2; ++p) {
    routes.fill_pull(p, request);
    routes.fill_push(p, tables, push);
    REQUIRE(push.size() == request.size());
    for (size_t i = 0; i < push.size(); ++i) {
      CHECK(push[i].shard == request[i].shard);
      CHECK(push[i].keys.keys == request[i].keys.keys);
      auto dim = dim_of(pl, push[i].shard);
      std::vector<float> expected;
      for (auto key : push[i].keys.keys) {
        auto g = row_of_key(key, dim, 0.5f);
        expected.insert(expected.end(), g.begin(), g.end());
      }
      CHECK(std::vector<float>(push[i].values.values.begin(),
                               push[i].values.values.end())
            == expected);
      pushed += push[i].keys.keys.size();
    }
  }
  CHECK(pushed == 5 + 4); // every unique key once
}

TEST_CASE("a pull reply that does not answer the request is refused",
          "[actors][key_routes]") {
  auto pl = test_placement();
  key_routes routes{pl, 2};
  std::vector<table_lookup> tables{lookup(1, 2, {4, 7, 5, 29, 0})};
  routes.route(pl, tables);
  std::vector<table_rows> request;
  routes.fill_pull(1, request);
  REQUIRE(request.size() == 2); // shards 3 and 1
  auto good = serve(pl, request);
  auto bad = good;
  SECTION("one table too few") {
    bad.pop_back();
  }
  SECTION("one table too many") {
    bad.push_back(bad.back());
  }
  SECTION("a row one float short") {
    bad[1].values.values.pop_back();
  }
  SECTION("one float too many") {
    bad[0].values.values.push_back(1);
  }
  SECTION("the tables in another order") {
    std::swap(bad[0], bad[1]);
  }
  SECTION("another shard's id") {
    bad[1].shard = 2;
  }
  CHECK(routes.scatter_pull(1, bad, tables) == errc::bad_message);
  CHECK(!routes.scatter_pull(1, good, tables));
}

TEST_CASE("buffers reused across steps with other keys route correctly",
          "[actors][key_routes]") {
  auto pl = test_placement();
  key_routes routes{pl, 2};
  std::vector<table_rows> request;
  // Step 1: keys on every shard of both tables.
  std::vector<table_lookup> step1{lookup(1, 2, {4, 7, 4, 5, 29, 0}),
                                  lookup(2, 3, {100, 200, 300, 400, 500})};
  routes.route(pl, step1);
  pull_all(pl, routes, step1);
  check_rows(step1);
  // Step 2: fewer keys, all on shard 3 (server 1); no ids at all.
  std::vector<table_lookup> step2{lookup(1, 2, {8, 2, 8}),
                                  lookup(2, 3, {})};
  routes.route(pl, step2);
  routes.fill_pull(0, request);
  CHECK(request.empty());
  routes.fill_pull(1, request);
  REQUIRE(request.size() == 1);
  CHECK(request[0].shard == 3);
  CHECK(request[0].keys.keys == std::vector<uint64_t>{8, 2});
  pull_all(pl, routes, step2);
  check_rows(step2);
  check_routes(pl, routes, step2);
  // Step 3: more keys than ever, tables in the other order.
  std::vector<uint64_t> all(30);
  for (uint64_t k = 0; k < 30; ++k)
    all[k] = 29 - k;
  std::vector<table_lookup> step3{lookup(2, 3, {7, 1ULL << 40, 7, 12345}),
                                  lookup(1, 2, all)};
  routes.route(pl, step3);
  check_routes(pl, routes, step3);
  pull_all(pl, routes, step3);
  check_rows(step3);
  size_t emb_keys = 0;
  for (uint32_t p = 0; p < 2; ++p) {
    routes.fill_pull(p, request);
    for (auto& t : request)
      if (pl.shards[t.shard].variable == 1) {
        CHECK(t.keys.keys.size() == 10);
        emb_keys += t.keys.keys.size();
      }
  }
  CHECK(emb_keys == 30);
}

TEST_CASE("payload_bytes counts floats and keys", "[actors][key_routes]") {
  pull_reply r;
  r.values.values.resize(3);
  r.tables.resize(2);
  r.tables[0].values.values.resize(4);
  r.tables[1].keys.keys.resize(2);
  CHECK(payload_bytes(r) == 3 * 4 + 4 * 4 + 2 * 8);
  push_request p;
  p.gradient.values.resize(5);
  p.tables.resize(1);
  p.tables[0].keys.keys.resize(2);
  p.tables[0].values.values.resize(6);
  CHECK(payload_bytes(p) == 5 * 4 + 2 * 8 + 6 * 4);
}
