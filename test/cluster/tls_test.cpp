// Certificates (cluster/net/certs.hpp) and TLS between a gate and a dialer in
// one process (cluster/net/tls.hpp, cluster/net/gate.hpp). The refusals between real
// processes are in test/tls_test.sh.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "caf/actor_cast.hpp"
#include "caf/actor_system.hpp"
#include "caf/send.hpp"

#include "actors/ps_actor.hpp"
#include "cluster/net/certs.hpp"
#include "cluster/net/gate.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "cluster/net/tls.hpp"
#include "core/error.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;

namespace {

std::shared_ptr<tls_context> load(const test::temp_dir& d,
                                  const node_identity& n) {
  return tls_context::load(tls_files_in(d.path().string(), n));
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace

TEST_CASE("every node's certificate loads and names its role and index",
          "[tls]") {
  test::temp_dir d{"tls_certs"};
  auto files = make_cluster_certs(d.path().string(), nodes_of(2, 3), 2);
  CHECK(files.size() == 2 * (1 + 1 + 2 + 3));
  for (auto& n : nodes_of(2, 3)) {
    auto ctx = load(d, n);
    CHECK(ctx->identity() == n);
    CHECK(ctx->warning().empty());
    CHECK(ctx->describe().find("CN = " + n.name()) != std::string::npos);
  }
  CHECK((std::filesystem::status(d.file("ps0.key")).permissions()
         & std::filesystem::perms::others_read)
        == std::filesystem::perms::none);
  // A folder that holds a CA already is not overwritten.
  CHECK_THROWS_AS(make_cluster_certs(d.path().string(), nodes_of(1, 1), 2),
                  input_error);
}

TEST_CASE("a node added later with the CA's key loads like the first ones, "
          "and another CA's key is refused",
          "[tls]") {
  test::temp_dir d{"tls_add"};
  test::temp_dir other{"tls_add_other"};
  make_cluster_certs(d.path().string(), nodes_of(1, 1), 2);
  make_cluster_certs(other.path().string(), nodes_of(1, 1), 2);
  auto files = add_node_certs(d.path().string(), d.path().string(),
                              {{"worker", 7}}, 2);
  CHECK(files.size() == 2);
  auto ctx = load(d, {"worker", 7});
  CHECK(ctx->identity() == node_identity{"worker", 7});
  CHECK(ctx->warning().empty()); // issued by the CA of d
  // A ca.key that is not the CA's own.
  std::filesystem::copy_file(other.file("ca.key"), d.file("ca.key"),
                             std::filesystem::copy_options::overwrite_existing);
  CHECK_THAT(message_of([&] {
               add_node_certs(d.path().string(), d.path().string(),
                              {{"worker", 8}}, 2);
             }),
             Catch::Contains("ca.key does not belong to"));
  test::temp_dir empty{"tls_add_empty"};
  CHECK_THAT(message_of([&] {
               add_node_certs(empty.path().string(), empty.path().string(),
                              {{"worker", 8}}, 2);
             }),
             Catch::Contains("cannot read") && Catch::Contains("ca.pem"));
}

TEST_CASE("unusable certificate files are refused naming the file", "[tls]") {
  test::temp_dir a{"tls_a"};
  test::temp_dir b{"tls_b"};
  make_cluster_certs(a.path().string(), nodes_of(1, 1), 2);
  make_cluster_certs(b.path().string(), nodes_of(1, 1), 2);
  auto files = tls_files_in(a.path().string(), {"ps", 0});
  auto missing = files;
  missing.cert = a.file("nope.pem");
  CHECK_THAT(message_of([&] { tls_context::load(missing); }),
             Catch::Contains("nope.pem") && Catch::Contains("cannot read"));
  auto wrong_key = files;
  wrong_key.key = a.file("worker0.key");
  CHECK_THAT(message_of([&] { tls_context::load(wrong_key); }),
             Catch::Contains("worker0.key does not match")
               && Catch::Contains("ps0.pem"));
  auto other_ca = files;
  other_ca.ca = b.file("ca.pem");
  // Another CA's: loads, with a warning (the peers refuse it).
  CHECK_THAT(tls_context::load(other_ca)->warning(),
             Catch::Contains("is not issued by the CA"));
  auto not_pem = files;
  not_pem.ca = a.file("ps0.key");
  CHECK_THAT(message_of([&] { tls_context::load(not_pem); }),
             Catch::Contains("not a PEM certificate"));
}

TEST_CASE("a ticket is redeemed once, and only for the node it was issued to",
          "[tls]") {
  test::temp_dir d{"tls_tickets"};
  make_cluster_certs(d.path().string(), nodes_of(1, 2), 2);
  auto ps = load(d, {"ps", 0});
  auto t = ps->issue_ticket({"worker", 1});
  CHECK(t.size() == 32);
  CHECK_THAT(ps->redeem(t, {"chief", 0}),
             Catch::Contains("names worker1, its handshake says coordinator"));
  CHECK_FALSE(ps->redeem(t, {"worker", 1}).empty()); // used up above
  auto u = ps->issue_ticket({"worker", 1});
  CHECK(ps->redeem(u, {"worker", 1}).empty());
  CHECK_FALSE(ps->redeem("", {"worker", 1}).empty());
  CHECK(may_dial("chief", "worker"));
  CHECK(may_dial("worker", "ps"));
  CHECK(may_dial("ps", "ps")); // replication
  CHECK_FALSE(may_dial("worker", "worker"));
  CHECK_FALSE(may_dial("ps", "worker"));
  CHECK(may_dial("worker", "chief")); // a worker joining a running job
  CHECK_FALSE(may_dial("ps", "chief"));
}

TEST_CASE("a ticket issued to worker0 is refused as ps0 or as the "
          "coordinator, whose index is 0 too, and accepted once as worker0",
          "[tls]") {
  // Same index, other role: the role alone must refuse it.
  test::temp_dir d{"tls_roles"};
  make_cluster_certs(d.path().string(), nodes_of(1, 1), 2);
  auto ps = load(d, {"ps", 0});
  const node_identity worker0{"worker", 0};
  auto t = ps->issue_ticket(worker0);
  CHECK_THAT(ps->redeem(t, {"ps", 0}),
             Catch::Contains("names worker0, its handshake says ps0"));
  auto u = ps->issue_ticket(worker0);
  CHECK_THAT(ps->redeem(u, {"chief", 0}),
             Catch::Contains("names worker0, its handshake says coordinator"));
  auto v = ps->issue_ticket(worker0);
  CHECK(ps->redeem(v, worker0).empty());
  CHECK_THAT(ps->redeem(v, worker0), Catch::Contains("no valid TLS ticket"));
  // A refused ticket is spent too: the right identity cannot use it after.
  CHECK_FALSE(ps->redeem(t, worker0).empty());
  CHECK_FALSE(ps->redeem(u, worker0).empty());
}

TEST_CASE("a gate with TLS admits the certificate of the node expected and "
          "refuses others",
          "[tls]") {
  test::temp_dir d{"tls_gate"};
  test::temp_dir other{"tls_other"};
  make_cluster_certs(d.path().string(), nodes_of(2, 2), 2);
  make_cluster_certs(other.path().string(), nodes_of(2, 2), 2);
  system_config server_cfg{1, network_options{}};
  caf::actor_system server{server_cfg};
  system_config client_cfg{1, network_options{}};
  caf::actor_system client{client_cfg};
  auto ps = spawn_ps(server, ps_options{});
  {
    gate g{server, host_port{"127.0.0.1", 0},
           caf::actor_cast<caf::strong_actor_ptr>(ps),
           server.message_types(ps), "ps 0", load(d, {"ps", 0})};
    host_port at{"127.0.0.1", g.port()};
    node_identity ps0{"ps", 0};
    node_identity ps1{"ps", 1};
    auto worker = load(d, {"worker", 0});
    auto ok = dial(client, at, std::chrono::seconds(5), worker.get(), &ps0);
    CHECK(ok.error == "");
    CHECK(ok.actor != nullptr);
    CHECK(ok.ticket.size() == 32);
    // The dialer wanted ps1: refused on its side, not retried.
    auto wrong = dial(client, at, std::chrono::seconds(5), worker.get(), &ps1);
    CHECK(wrong.actor == nullptr);
    CHECK_FALSE(wrong.retryable);
    CHECK_THAT(wrong.error, Catch::Contains("names ps0"));
    // Only the coordinator dials a worker.
    {
      gate w{server, host_port{"127.0.0.1", 0},
             caf::actor_cast<caf::strong_actor_ptr>(ps),
             server.message_types(ps), "worker 0", load(d, {"worker", 0})};
      node_identity worker0{"worker", 0};
      auto other_worker = load(d, {"worker", 1});
      auto role = dial(client, host_port{"127.0.0.1", w.port()},
                       std::chrono::seconds(5), other_worker.get(), &worker0);
      CHECK(role.actor == nullptr);
      CHECK_FALSE(role.retryable);
      CHECK_THAT(role.error,
                 Catch::Contains("a worker does not connect to a worker"));
    }
    // Another CA's certificate: the TLS handshake fails on both sides.
    auto stranger = load(other, {"worker", 0});
    auto ca = dial(client, at, std::chrono::seconds(5), stranger.get(), &ps0);
    CHECK(ca.actor == nullptr);
    CHECK_FALSE(ca.retryable);
    CHECK_THAT(ca.error, Catch::Contains("certificate"));
    // A plain dialer gets a plain refusal.
    auto plain = dial(client, at, std::chrono::seconds(5));
    CHECK(plain.actor == nullptr);
    CHECK_THAT(plain.error, Catch::Contains("requires TLS"));
    // The gate counts each refusal (the last ones may still be on their way).
    for (int i = 0; i < 200 && g.rejected() < 3; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(g.rejected() == 3);
  }
  caf::anon_send_exit(ps, caf::exit_reason::user_shutdown);
}
