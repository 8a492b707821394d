// Pushes in pieces (cluster.layer_pushes, actors/ps_pieces.hpp): a server
// applies each piece as it comes, counts the update once its pieces cover
// the region, applies a piece at most once, refuses malformed pieces, and a
// backup applies its primary's forwarded pieces alike.

#include <vector>

#include <catch2/catch.hpp>

#include "actors/ps_pieces.hpp"
#include "test/actors/ps_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

optimizer_config adam() {
  return optimizer_config{"adam", 0.1f, {}};
}

/// The run [from, from + size) of `grad` as a piece of closure `closure`.
push_request piece_of(uint64_t closure, const std::vector<float>& grad,
                      uint64_t from, uint64_t size, uint64_t read_clock = 0) {
  auto req = make_push(read_clock, closure,
                       {grad.begin() + from, grad.begin() + from + size});
  req.piece = true;
  req.offset = from;
  return req;
}

/// A server holding a kernel of 2 x 2 and a bias of 2 (a region of 6).
ps_actor layer_server(deterministic& t, consistency mode = consistency::async) {
  auto ps = t.spawn(options(adam(), adam(), mode));
  t.create(ps, dense_shard("kernel", 2, 2, {1, 2, 3, 4}));
  t.create(ps, dense_shard("bias", 1, 2, {0.5f, -0.5f}));
  return ps;
}

std::vector<float> values_of(deterministic& t, const ps_actor& ps) {
  return as_vector(t.pull(ps, dense_pull()).values.values);
}

} // namespace

TEST_CASE_METHOD(deterministic,
                 "a push in pieces, last layer first, leaves the values of "
                 "the whole push and counts once, with its last piece",
                 "[actors][ps][pieces]") {
  auto whole = layer_server(*this);
  auto pieces = layer_server(*this);
  std::vector<float> g1{0.5f, -1, 2, 0.25f, 1, -3};
  std::vector<float> g2{-0.5f, 1, 0.125f, 4, -1, 2};
  CHECK(push(whole, make_push(0, 1, g1)) == 1);
  CHECK(push(whole, make_push(1, 2, g2)) == 2);
  // The bias (the last layer) first: applied, the update not counted yet.
  CHECK(push(pieces, piece_of(1, g1, 4, 2)) == 0);
  auto s = stats(pieces);
  CHECK(s.clock == 0);
  CHECK(s.pushes == 0);
  CHECK(s.pieces == 1);
  auto v = values_of(*this, pieces);
  CHECK(v[0] == 1.0f);
  CHECK(v[4] != 0.5f);
  CHECK(push(pieces, piece_of(1, g1, 0, 4)) == 1);
  CHECK(push(pieces, piece_of(2, g2, 4, 2, 1)) == 1);
  CHECK(push(pieces, piece_of(2, g2, 0, 4, 1)) == 2);
  // Adam's step count (bias correction) is the update's, not the piece's:
  // the same values as the whole pushes.
  auto w = values_of(*this, whole);
  v = values_of(*this, pieces);
  REQUIRE(v.size() == w.size());
  for (size_t i = 0; i < v.size(); ++i)
    CHECK(v[i] == Approx(w[i]).margin(1e-6));
  s = stats(pieces);
  CHECK(s.clock == 2);
  CHECK(s.pushes == 2);
  CHECK(s.pieces == 4);
  CHECK(s.duplicates == 0);
}

TEST_CASE_METHOD(deterministic,
                 "a piece is applied at most once, overlapping, empty or "
                 "out-of-region pieces and pieces under sync are refused",
                 "[actors][ps][pieces]") {
  auto ps = layer_server(*this);
  std::vector<float> g{1, 1, 1, 1, 1, 1};
  auto refused = [&](const ps_actor& to, push_request req) {
    return refusal<uint64_t>(to, push_atom_v, std::move(req));
  };
  CHECK(push(ps, piece_of(1, g, 0, 4)) == 0);
  auto after_one = values_of(*this, ps);
  // The same piece again (a push sent again after a lost ack).
  CHECK(push(ps, piece_of(1, g, 0, 4)) == 0);
  CHECK(values_of(*this, ps) == after_one);
  CHECK(stats(ps).duplicates == 1);
  // A run that overlaps one applied, one past the region, an empty one.
  CHECK(refused(ps, piece_of(1, g, 2, 4)) == errc::bad_message);
  auto past = piece_of(1, g, 4, 2);
  past.offset = 5;
  CHECK(refused(ps, past) == errc::bad_message);
  auto empty = piece_of(1, g, 4, 0);
  CHECK(refused(ps, empty) == errc::bad_message);
  CHECK(values_of(*this, ps) == after_one);
  // The last piece completes it; after that every piece of it is a
  // duplicate.
  CHECK(push(ps, piece_of(1, g, 4, 2)) == 1);
  auto done = values_of(*this, ps);
  CHECK(push(ps, piece_of(1, g, 4, 2)) == 1);
  CHECK(push(ps, piece_of(1, g, 0, 4)) == 1);
  CHECK(values_of(*this, ps) == done);
  auto s = stats(ps);
  CHECK(s.pushes == 1);
  CHECK(s.pieces == 2);
  CHECK(s.duplicates == 3);
  // Under sync a push is one term of a round's mean: no pieces.
  auto sync = layer_server(*this, consistency::sync);
  CHECK(refused(sync, piece_of(1, g, 0, 4)) == errc::bad_message);
}

TEST_CASE("the partial pushes of a snapshot are checked against the region",
          "[actors][ps][pieces]") {
  ps_options opts;
  ps_replica r{0, opts, make_update_rule(optimizer_config{"sgd", 1.0f, {}})};
  std::vector<float> init(6, 0.0f);
  r.dense.append(init.data(), init.size());
  r.partial[7] = ps_replica::partial_push{3, 1, 2, {{4, 2}}};
  auto keys = encode_partials(r);
  auto back = decode_partials(r, keys, 0);
  REQUIRE(back);
  REQUIRE(back->count(7) == 1);
  CHECK(back->at(7).step == 3);
  CHECK(back->at(7).staleness == 1);
  CHECK(back->at(7).runs == std::vector<std::pair<uint64_t, uint64_t>>{{4, 2}});
  auto refused = [&](std::vector<uint64_t> k) {
    auto got = decode_partials(r, key_buffer{std::move(k)}, 0);
    return !got && got.error() == errc::bad_message;
  };
  CHECK(refused({7, 3, 1, 2}));             // cut short
  CHECK(refused({7, 3, 1, 2, 1, 5, 2}));    // run past the region
  CHECK(refused({7, 3, 1, 3, 1, 4, 2}));    // covered != runs
  CHECK(refused({7, 3, 1, 6, 1, 0, 6}));    // covers it all: not partial
  CHECK(refused({7, 3, 1, 2, 9, 4, 2}));    // more runs than given
  CHECK(refused({7, 3, 1, 2, 1, 4, 2, 7, 3, 1, 2, 1, 0, 2})); // twice
}
