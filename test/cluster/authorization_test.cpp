#include "cluster/net/authorization.hpp"

#include <catch2/catch.hpp>

#include "caf/actor_system.hpp"
#include "caf/actor_system_config.hpp"
#include "caf/scoped_actor.hpp"

using namespace actorps;

namespace {

caf::node_id node(uint32_t pid) {
  auto id = caf::make_node_id(pid, "0123456789012345678901234567890123456789");
  REQUIRE(id);
  return *id;
}

} // namespace

TEST_CASE("the table of who may send a parameter server what: the "
          "coordinator its requests, a worker pulls and pushes, a ps "
          "replication, anyone else nothing",
          "[cluster][authorization]") {
  using k = ps_request;
  for (auto kind : {k::create, k::pull, k::configure, k::install, k::stats,
                    k::save, k::restore, k::prune, k::ping})
    CHECK(may_send("chief", kind));
  CHECK_FALSE(may_send("chief", k::push));
  CHECK_FALSE(may_send("chief", k::replicate));
  for (auto kind : {k::pull, k::push, k::ping})
    CHECK(may_send("worker", kind));
  for (auto kind : {k::create, k::replicate, k::configure, k::install,
                    k::stats, k::save, k::restore, k::prune})
    CHECK_FALSE(may_send("worker", kind));
  for (auto kind : {k::replicate, k::install, k::ping})
    CHECK(may_send("ps", kind));
  for (auto kind : {k::create, k::pull, k::push, k::configure, k::stats,
                    k::save, k::restore, k::prune})
    CHECK_FALSE(may_send("ps", kind));
  for (auto role : {"evaluator", "", "coordinator"})
    for (auto kind : {k::pull, k::ping, k::save})
      CHECK_FALSE(may_send(role, kind));
}

TEST_CASE("a peer registry knows each admitted node by its identity, and a "
          "second process of one identity fences the first",
          "[cluster][authorization]") {
  peer_registry peers;
  auto a = node(101);
  auto b = node(102);
  auto c = node(103);
  CHECK_FALSE(peers.find(a));
  CHECK_FALSE(peers.admit(a, {"worker", 0, 7}));
  CHECK_FALSE(peers.admit(c, {"worker", 1, 9}));
  REQUIRE(peers.find(a));
  CHECK(peers.find(a)->role == "worker");
  CHECK(peers.find(a)->incarnation == 7);
  // The same node again: no one displaced.
  CHECK_FALSE(peers.admit(a, {"worker", 0, 7}));
  // Another process as worker 0: a is forgotten, c (worker 1) is not.
  auto displaced = peers.admit(b, {"worker", 0, 8});
  REQUIRE(displaced);
  CHECK(*displaced == a);
  CHECK_FALSE(peers.find(a));
  CHECK(peers.find(b)->incarnation == 8);
  CHECK(peers.find(c)->index == 1);
  CHECK(to_string(*peers.find(b)) == "worker 0 (incarnation 8)");
}

TEST_CASE("a parameter server's authorizer serves its own process and "
          "refuses an anonymous sender",
          "[cluster][authorization]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto peers = std::make_shared<peer_registry>();
  auto authorize = authorize_ps_requests(peers, sys.node());
  caf::scoped_actor self{sys};
  auto local = caf::actor_cast<caf::strong_actor_ptr>(self);
  CHECK(authorize(local, ps_request::save, no_worker).empty());
  CHECK(authorize(local, ps_request::pull, 3).empty());
  auto why = authorize(nullptr, ps_request::stats, no_worker);
  CHECK_THAT(why, Catch::Contains("anonymous stats"));
  // Senders of other processes (proxies of remote nodes need a middleman):
  // test/authz_test.sh.
}

TEST_CASE("what a peer may announce in BASP: a worker twice the dense "
          "variables and 64 MiB, the coordinator, servers and peers "
          "without a certificate CAF's limit, any a handshake of 1 MiB",
          "[cluster][authorization][basp]") {
  uint64_t dense = 1'000'000;
  auto worker = basp_limits_for(node_identity{"worker", 3}, dense);
  CHECK(worker.message_bytes == 2 * dense + (uint64_t{64} << 20));
  CHECK(worker.handshake_bytes == 1u << 20);
  CHECK_FALSE(worker.routed); // a worker talks only to whom it dials
  auto anyone = basp_limits_for(std::nullopt, dense); // no TLS
  CHECK(anyone.message_bytes == UINT32_MAX);
  CHECK(anyone.handshake_bytes == 1u << 20);
  for (auto role : {"chief", "ps"}) {
    auto l = basp_limits_for(node_identity{role, 0}, dense);
    CHECK(l.message_bytes == UINT32_MAX);
    CHECK(l.handshake_bytes == 1u << 20);
    CHECK(l.routed); // a ps reaches its backup through the coordinator first
  }
  // A model too large for the bound saturates at CAF's.
  CHECK(basp_limits_for(node_identity{"worker", 0}, uint64_t{3} << 30)
          .message_bytes
        == UINT32_MAX);
}

TEST_CASE("one rule for a request in a worker's name: its own index, or no "
          "worker for a pull, and nothing a role may not send",
          "[cluster][authorization]") {
  using k = ps_request;
  CHECK(request_refusal("worker", 3, k::pull, 3).empty());
  CHECK(request_refusal("worker", 3, k::push, 3).empty());
  CHECK(request_refusal("worker", 3, k::pull, no_worker).empty());
  CHECK(request_refusal("worker", 3, k::pull, 4) == "in the name of worker 4");
  CHECK(request_refusal("worker", 3, k::push, no_worker)
        == "in the name of worker none");
  CHECK(request_refusal("worker", 3, k::save, 3) == "a worker may not send it");
  CHECK(request_refusal("ps", 0, k::push, 0) == "a ps may not send it");
  CHECK(request_refusal("chief", 0, k::pull, 5).empty());
}
