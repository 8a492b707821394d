// The node's TCP front door (cluster/net/gate.hpp) without TLS: check_preamble
// on whole preambles, their prefixes, a wrong magic byte and another
// protocol version; a gate on 127.0.0.1 that closes and counts a peer
// sending garbage, a peer of another version (after answering with its own
// preamble) and a silent peer; dial() reaching the published actor through
// CAF, dial() to a port where nothing listens, and a second gate on a port
// in use; the job's secret: a right one admitted, a wrong, missing or extra
// one refused on both sides (BASP and data channel), a raw peer that never
// proves it closed, a gate whose proof is wrong refused by the dialer. TLS
// between a gate and a dialer is in tls_test.cpp. Every wait is bounded: a
// missing answer fails the test, it never hangs it.

#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "caf/actor_cast.hpp"
#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"
#include "caf/typed_actor.hpp"
#include "caf/typed_event_based_actor.hpp"

#include "cluster/net/gate.hpp"
#include "cluster/net/gate_io.hpp"
#include "cluster/net/handshake.hpp"
#include "cluster/net/job_secret.hpp"
#include "cluster/net/tls_channel.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "core/error.hpp"

using namespace actorps;
using namespace std::chrono_literals;

namespace {

using verdict = preamble_check::verdict;

/// The 16-byte preamble as gate.hpp writes it down: "ACTORPS\0", `version`
/// as a little-endian uint32, then 4 reserved bytes.
std::string preamble_of(uint32_t version, char reserved = 0) {
  std::string p{"ACTORPS", 7};
  p += '\0';
  for (int i = 0; i < 4; ++i)
    p += static_cast<char>((version >> (8 * i)) & 0xff);
  p += std::string(4, reserved);
  return p;
}

preamble_check check(const std::string& bytes) {
  return check_preamble(bytes.data(), bytes.size());
}

/// Replies to (get, x) with x + 1.
using ping_actor =
  caf::typed_actor<caf::replies_to<caf::get_atom, int32_t>::with<int32_t>>;

ping_actor::behavior_type ping_impl() {
  return {[](caf::get_atom, int32_t x) { return x + 1; }};
}

/// A blocking TCP connection to 127.0.0.1:`port`; -1 if it fails.
int connect_to(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL)
         == static_cast<ssize_t>(bytes.size());
}

/// Reads from `fd` until the peer closes it (end of stream or an error such
/// as a reset) or `limit` passes; what arrived before goes to `received`.
/// True if closed within `limit`.
bool closed_within(int fd, std::chrono::milliseconds limit,
                   std::string& received) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0)
      return false;
    pollfd p{fd, POLLIN, 0};
    auto rc = poll(&p, 1, static_cast<int>(left));
    if (rc < 0 && errno != EINTR)
      return false;
    if (rc <= 0)
      continue;
    char buf[256];
    auto n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0)
      return true;
    if (n > 0)
      received.append(buf, static_cast<size_t>(n));
    else if (errno != EINTR && errno != EAGAIN)
      return true; // reset
  }
}

/// Polls `pred` every 10 ms for at most `limit`; its last value.
bool eventually(const std::function<bool()>& pred,
                std::chrono::milliseconds limit = 5s) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  return pred();
}

/// A networked system with a ping actor to publish (as cluster/topology/node.cpp
/// publishes its node actor); the actor exits with the fixture.
struct gate_fixture {
  system_config cfg{1, network_options{}};
  caf::actor_system sys{cfg};
  ping_actor ping = sys.spawn(ping_impl);

  caf::strong_actor_ptr whom() const {
    return caf::actor_cast<caf::strong_actor_ptr>(ping);
  }

  ~gate_fixture() {
    caf::anon_send_exit(ping, caf::exit_reason::user_shutdown);
  }
};

} // namespace

// -- check_preamble ------------------------------------------------------------

TEST_CASE("a preamble of this node's protocol version is ok and states it",
          "[gate]") {
  auto c = check(preamble_of(protocol_version));
  CHECK(c.result == verdict::ok);
  CHECK(c.version == protocol_version);
  CHECK(c.first_bytes == "4143544f52505300");
  // Bytes after the 16 do not change the verdict.
  auto longer = check(preamble_of(protocol_version) + "BASP...");
  CHECK(longer.result == verdict::ok);
  CHECK(longer.version == protocol_version);
}

TEST_CASE("every strict prefix of a valid preamble is incomplete", "[gate]") {
  auto p = preamble_of(protocol_version);
  for (size_t n = 0; n < preamble_size; ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK(check_preamble(p.data(), n).result == verdict::incomplete);
  }
}

TEST_CASE("one wrong magic byte is not actorps, in the whole and in every "
          "prefix that holds it",
          "[gate]") {
  for (size_t i = 0; i < 8; ++i) {
    auto p = preamble_of(protocol_version);
    p[i] = static_cast<char>(p[i] ^ 0x20);
    for (size_t n = 0; n <= preamble_size; ++n) {
      INFO("byte " << i << " wrong, prefix of " << n << " bytes");
      auto c = check_preamble(p.data(), n);
      CHECK(c.result == (n > i ? verdict::not_actorps : verdict::incomplete));
    }
  }
}

TEST_CASE("a preamble of another protocol version reports that version",
          "[gate]") {
  // 0x01020304 and 256 tell little-endian from big-endian.
  for (uint32_t v : {protocol_version + 1, protocol_version - 1, 0u, 256u,
                     0x01020304u, 0xffffffffu}) {
    INFO("version " << v);
    auto c = check(preamble_of(v));
    CHECK(c.result == verdict::other_version);
    CHECK(c.version == v);
    // A prefix short of the version is still incomplete.
    CHECK(check_preamble(preamble_of(v).data(), 11).result
          == verdict::incomplete);
  }
}

TEST_CASE("the 4 reserved bytes of a preamble are not checked", "[gate]") {
  for (char r : {'\x01', '\x7f', '\x80', '\xff'}) {
    INFO("reserved bytes " << static_cast<int>(static_cast<unsigned char>(r)));
    auto c = check(preamble_of(protocol_version, r));
    CHECK(c.result == verdict::ok);
    CHECK(c.version == protocol_version);
  }
}

TEST_CASE("first_bytes is the first 8 bytes or fewer in lowercase hex",
          "[gate]") {
  CHECK(check_preamble("", 0).first_bytes == "");
  CHECK(check_preamble("ACT", 3).first_bytes == "414354");
  CHECK(check("GET / HTTP/1.0\r\n\r\n").first_bytes == "474554202f204854");
  // Bytes above 0x7f are not sign-extended (a TLS ClientHello starts 16 03).
  CHECK(check("\x16\x03\x01\xff").first_bytes == "160301ff");
  CHECK(check("\x16\x03\x01\xff").result == verdict::not_actorps);
}

// -- the gate ---------------------------------------------------------------------

TEST_CASE_METHOD(gate_fixture,
                 "a gate closes a peer that sends garbage and counts it",
                 "[gate]") {
  gate g{sys, host_port{"127.0.0.1", 0}, whom(), sys.message_types(ping),
         "test 0"};
  REQUIRE(g.port() != 0);
  CHECK(g.rejected() == 0);
  int fd = connect_to(g.port());
  REQUIRE(fd >= 0);
  CHECK(send_all(fd, "GET / HTTP/1.0\r\n\r\n"));
  std::string received;
  CHECK(closed_within(fd, 5s, received));
  CHECK(received.empty()); // a stranger learns nothing
  close(fd);
  CHECK(eventually([&] { return g.rejected() == 1; }));
}

TEST_CASE_METHOD(gate_fixture,
                 "a gate answers a peer of another protocol version with its "
                 "own preamble, then closes it and counts it",
                 "[gate]") {
  gate g{sys, host_port{"127.0.0.1", 0}, whom(), sys.message_types(ping),
         "test 0"};
  int fd = connect_to(g.port());
  REQUIRE(fd >= 0);
  CHECK(send_all(fd, preamble_of(protocol_version + 1)));
  std::string received;
  CHECK(closed_within(fd, 5s, received));
  close(fd);
  // The peer learns which version this node speaks.
  REQUIRE(received.size() == preamble_size);
  auto c = check(received);
  CHECK(c.result == verdict::ok);
  CHECK(c.version == protocol_version);
  CHECK(eventually([&] { return g.rejected() == 1; }));
}

TEST_CASE_METHOD(gate_fixture,
                 "a gate closes a peer that sends nothing and counts it",
                 "[gate]") {
  gate g{sys, host_port{"127.0.0.1", 0}, whom(), sys.message_types(ping),
         "test 0"};
  int fd = connect_to(g.port());
  REQUIRE(fd >= 0);
  std::string received;
  // The gate waits 2 s for a preamble.
  CHECK(closed_within(fd, 5s, received));
  CHECK(received.empty());
  close(fd);
  CHECK(eventually([&] { return g.rejected() == 1; }));
}

TEST_CASE_METHOD(gate_fixture,
                 "dial reaches the actor a gate publishes and it answers "
                 "through CAF",
                 "[gate]") {
  system_config client_cfg{1, network_options{}};
  caf::actor_system client{client_cfg};
  gate g{sys, host_port{"127.0.0.1", 0}, whom(), sys.message_types(ping),
         "test 0"};
  auto d = dial(client, host_port{"127.0.0.1", g.port()}, 5s);
  CHECK(d.error == "");
  REQUIRE(d.actor != nullptr);
  CHECK(d.ticket.empty()); // tickets only with TLS
  {
    caf::scoped_actor self{client};
    int32_t answer = 0;
    std::string failure;
    self->request(caf::actor_cast<ping_actor>(d.actor), 5s, caf::get_atom_v,
                  int32_t{41})
      .receive([&](int32_t x) { answer = x; },
               [&](caf::error& e) { failure = client.render(e); });
    CHECK(failure == "");
    CHECK(answer == 42);
  }
  // An admitted peer is not counted.
  CHECK(g.rejected() == 0);
}

TEST_CASE("dial to a port where nothing listens fails and may be retried",
          "[gate]") {
  // A socket bound but not listening holds the port and refuses connections.
  int holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(holder >= 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(holder, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
  socklen_t len = sizeof(sa);
  REQUIRE(getsockname(holder, reinterpret_cast<sockaddr*>(&sa), &len) == 0);
  uint16_t port = ntohs(sa.sin_port);
  system_config cfg{1, network_options{}};
  caf::actor_system sys{cfg};
  auto d = dial(sys, host_port{"127.0.0.1", port}, 5s);
  close(holder);
  CHECK(d.actor == nullptr);
  CHECK_FALSE(d.error.empty());
  CHECK(d.retryable);
}

TEST_CASE_METHOD(gate_fixture,
                 "a second gate on a port in use throws naming the address",
                 "[gate]") {
  gate g{sys, host_port{"127.0.0.1", 0}, whom(), sys.message_types(ping),
         "test 0"};
  host_port at{"127.0.0.1", g.port()};
  std::string what = "(no error)";
  try {
    gate second{sys, at, whom(), sys.message_types(ping), "test 1"};
  } catch (const runtime_failure& e) {
    what = e.what();
  }
  CHECK_THAT(what, Catch::Contains(to_string(at))
                     && Catch::Contains("test 1"));
  // The first gate still admits peers.
  system_config client_cfg{1, network_options{}};
  caf::actor_system client{client_cfg};
  auto d = dial(client, at, 5s);
  CHECK(d.error == "");
  CHECK(d.actor != nullptr);
}

// -- the job's secret (cluster/net/job_secret.hpp) --------------------------------

namespace {

std::shared_ptr<const job_secret> secret_of(char c) {
  return job_secret::of_bytes(std::string(32, c), std::string(1, c));
}

/// Asks the ping actor behind `d` for 41 + 1; its answer or -1.
int32_t ping_through(caf::actor_system& client, const dial_result& d) {
  caf::scoped_actor self{client};
  int32_t answer = -1;
  self->request(caf::actor_cast<ping_actor>(d.actor), 5s, caf::get_atom_v,
                int32_t{41})
    .receive([&](int32_t x) { answer = x; }, [&](caf::error&) {});
  return answer;
}

} // namespace

TEST_CASE_METHOD(gate_fixture,
                 "a dialer with the job's secret passes a gate that holds the "
                 "same one and reaches its actor",
                 "[gate][secret]") {
  system_config client_cfg{1, network_options{}};
  caf::actor_system client{client_cfg};
  gate g{sys,     host_port{"127.0.0.1", 0}, whom(), sys.message_types(ping),
         "test 0", nullptr, {}, {}, secret_of('a')};
  auto d = dial(client, host_port{"127.0.0.1", g.port()}, 5s, nullptr,
                nullptr, secret_of('a'));
  CHECK(d.error == "");
  REQUIRE(d.actor != nullptr);
  CHECK(ping_through(client, d) == 42);
  CHECK(g.rejected() == 0);
}

TEST_CASE_METHOD(gate_fixture,
                 "a wrong, missing or extra job secret is refused with the "
                 "reason on both sides, not retried, counted, and the gate "
                 "goes on serving",
                 "[gate][secret]") {
  system_config client_cfg{1, network_options{}};
  caf::actor_system client{client_cfg};
  gate with{sys,     host_port{"127.0.0.1", 0}, whom(), sys.message_types(ping),
            "test 0", nullptr, {}, {}, secret_of('a')};
  gate without{sys, host_port{"127.0.0.1", 0}, whom(),
               sys.message_types(ping), "test 1", nullptr, {}, {}, nullptr};
  auto at = [](const gate& g) { return host_port{"127.0.0.1", g.port()}; };
  struct row {
    const char* what;
    gate* target;
    std::shared_ptr<const job_secret> secret;
    const char* reason;
  };
  for (auto& r : {row{"wrong", &with, secret_of('b'),
                      "the dialer's proof does not match this node's secret"},
                  row{"missing", &with, nullptr,
                      "this node requires the job's secret and the dialer "
                      "has none"},
                  row{"extra", &without, secret_of('a'),
                      "the dialer holds a job secret and this node has none"}}) {
    INFO(r.what);
    auto before = r.target->rejected();
    auto d = dial(client, at(*r.target), 5s, nullptr, nullptr, r.secret);
    CHECK(d.actor == nullptr);
    CHECK_THAT(d.error, Catch::Contains("refuses this connection: job secret "
                                        "wrong or missing")
                          && Catch::Contains(r.reason));
    CHECK_FALSE(d.retryable);
    CHECK(eventually([&] { return r.target->rejected() == before + 1; }));
  }
  // Both go on serving the peers they admit.
  auto right = dial(client, at(with), 5s, nullptr, nullptr, secret_of('a'));
  CHECK(right.error == "");
  CHECK(ping_through(client, right) == 42);
  auto plain = dial(client, at(without), 5s, nullptr, nullptr, nullptr);
  CHECK(plain.error == "");
  CHECK(ping_through(client, plain) == 42);
}

TEST_CASE_METHOD(gate_fixture,
                 "a data channel proves the job's secret as BASP does",
                 "[gate][secret]") {
  std::atomic<int> channels{0};
  gate::data_handler keep = [&](std::unique_ptr<channel>, const std::string&) {
    ++channels;
  };
  gate g{sys,     host_port{"127.0.0.1", 0}, whom(), sys.message_types(ping),
         "test 0", nullptr, keep, {}, secret_of('a')};
  host_port at{"127.0.0.1", g.port()};
  auto open = [&](std::shared_ptr<const job_secret> secret, dial_result& out) {
    return detail::open_channel(at, std::chrono::steady_clock::now() + 5s,
                                nullptr, nullptr, channel_data, out, secret);
  };
  dial_result right;
  CHECK(open(secret_of('a'), right) != nullptr);
  CHECK(right.error == "");
  CHECK(eventually([&] { return channels == 1; }));
  dial_result wrong;
  CHECK(open(secret_of('b'), wrong) == nullptr);
  CHECK_THAT(wrong.error, Catch::Contains("job secret wrong or missing"));
  CHECK_FALSE(wrong.retryable);
  dial_result missing;
  CHECK(open(nullptr, missing) == nullptr);
  CHECK_THAT(missing.error, Catch::Contains("requires the job's secret"));
  CHECK(eventually([&] { return g.rejected() == 2; }));
  CHECK(channels == 1);
}

TEST_CASE_METHOD(gate_fixture,
                 "a raw peer without the secret reads the reason, and one that "
                 "never proves it is closed within the preamble's 2 s",
                 "[gate][secret]") {
  gate g{sys,     host_port{"127.0.0.1", 0}, whom(), sys.message_types(ping),
         "test 0", nullptr, {}, {}, secret_of('a')};
  int fd = connect_to(g.port());
  REQUIRE(fd >= 0);
  CHECK(send_all(fd, preamble_of(protocol_version)));
  std::string received;
  CHECK(closed_within(fd, 5s, received));
  close(fd);
  REQUIRE(received.size() > preamble_size + 2);
  CHECK(received[preamble_status_at] == 1);
  std::string reason;
  CHECK(parse_refusal(received.data() + preamble_size,
                      received.size() - preamble_size, reason));
  CHECK_THAT(reason, Catch::Contains("requires the job's secret"));
  // Says it holds the secret, takes the nonce, proves nothing.
  fd = connect_to(g.port());
  REQUIRE(fd >= 0);
  auto claims = preamble_of(protocol_version);
  claims[preamble_secret_at] = 1;
  CHECK(send_all(fd, claims));
  received.clear();
  CHECK(closed_within(fd, 5s, received));
  close(fd);
  REQUIRE(received.size() == preamble_size + secret_nonce_size);
  CHECK(received[preamble_secret_at] == 1);
  CHECK(eventually([&] { return g.rejected() == 2; }));
}

TEST_CASE("a dialer refuses a gate whose proof of the secret is wrong",
          "[gate][secret]") {
  // A fake gate: answers with the secret flag and a nonce, takes the
  // dialer's proof and answers with a proof made of nothing.
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listener >= 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0);
  REQUIRE(listen(listener, 1) == 0);
  socklen_t len = sizeof(sa);
  REQUIRE(getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len) == 0);
  size_t proof_bytes = 0;
  std::thread fake([&] {
    pollfd p{listener, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1)
      return;
    int fd = accept(listener, nullptr, nullptr);
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[64];
    if (recv(fd, buf, preamble_size, MSG_WAITALL) == preamble_size) {
      auto answer = preamble_of(protocol_version);
      answer[preamble_secret_at] = 1;
      answer += std::string(secret_nonce_size, '\x11');
      send_all(fd, answer);
      auto n = recv(fd, buf, sizeof(buf), MSG_WAITALL);
      proof_bytes = n > 0 ? static_cast<size_t>(n) : 0;
      send_all(fd, std::string(1, '\0') + std::string(32, '\x42'));
    }
    std::string rest;
    closed_within(fd, 5s, rest);
    close(fd);
  });
  system_config cfg{1, network_options{}};
  caf::actor_system client{cfg};
  auto d = dial(client, host_port{"127.0.0.1", ntohs(sa.sin_port)}, 5s,
                nullptr, nullptr, secret_of('a'));
  fake.join();
  close(listener);
  CHECK(proof_bytes == secret_nonce_size + secret_proof_size);
  CHECK(d.actor == nullptr);
  CHECK_THAT(d.error, Catch::Contains("job secret wrong or missing")
                        && Catch::Contains("not a node of this job"));
  CHECK_FALSE(d.retryable);
}
