// The data channel (cluster/net/data_frame.hpp, cluster/net/data_link.hpp): frames
// decode to what was encoded, malformed headers and metas are refused
// naming the problem; between two actor systems over loopback (a gate and a
// dial, without TLS: TLS is the same channel class as BASP's, tested in
// tls_test.cpp), pulls and pushes through the link give what they give over
// BASP, errors included (those with table keys go over BASP itself); a peer that sends garbage is closed and the server
// keeps serving; the link ends when its server is down; a gate that serves
// no data channel refuses one, naming why; an idle channel is closed (by
// the server, or first by the link) and opened again by the link's next
// request. Every wait is bounded.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include <poll.h>
#include <sys/socket.h>

#include "caf/actor_cast.hpp"
#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "actors/ps_actor.hpp"
#include "cluster/net/data_frame.hpp"
#include "cluster/net/data_link.hpp"
#include "cluster/net/shm_offer.hpp"
#include "cluster/net/gate.hpp"
#include "cluster/net/gate_io.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "cluster/net/tls_channel.hpp"
#include "core/error.hpp"

#include "test/loopback.hpp"

using namespace actorps;
using namespace std::chrono_literals;

namespace {

std::string header_with(const char* magic, uint8_t kind, uint64_t meta,
                        uint64_t bulk) {
  std::string h(frame_header_size, '\0');
  std::memcpy(h.data(), magic, 4);
  h[4] = static_cast<char>(kind);
  for (int i = 0; i < 4; ++i)
    h[16 + i] = static_cast<char>((meta >> (8 * i)) & 0xff);
  for (int i = 0; i < 8; ++i)
    h[24 + i] = static_cast<char>((bulk >> (8 * i)) & 0xff);
  return h;
}

struct system_fixture {
  system_config cfg{1, network_options{}};
  caf::actor_system sys{cfg};
};

/// A ps of 8 floats (all 0.5, sgd at rate 1) behind a gate that serves
/// data channels, in a system of its own; a second system dials it (BASP)
/// and opens a data link.
struct link_fixture {
  system_config server_cfg{1, network_options{}};
  caf::actor_system server_sys{server_cfg};
  system_config client_cfg{1, network_options{}};
  caf::actor_system client_sys{client_cfg};
  ps_actor ps;
  std::unique_ptr<gate> door;
  ps_actor remote; // over BASP
  ps_actor link;   // over the data channel
  /// Data channels the gate handed to the server.
  std::shared_ptr<std::atomic<int>> channels =
    std::make_shared<std::atomic<int>>(0);

  explicit link_fixture(data_session_options server_opts = {},
                        data_link_options link_opts = {}) {
    ps_options o;
    o.optimizer = optimizer_config{"sgd", 1.0f, {}};
    ps = spawn_ps(server_sys, o);
    door = std::make_unique<gate>(
      server_sys, host_port{"127.0.0.1", 0},
      caf::actor_cast<caf::strong_actor_ptr>(ps), server_sys.message_types(ps),
      "test ps", nullptr,
      [this, server_opts](std::unique_ptr<channel> ch,
                          const std::string& peer) {
        ++*channels;
        serve_data_channel(server_sys, ps, std::move(ch), "test <- " + peer,
                           server_opts);
      });
    auto r = dial(client_sys, where(), 5s);
    REQUIRE(r.actor);
    remote = caf::actor_cast<ps_actor>(r.actor);
    create_shard shard;
    shard.variable = "x";
    shard.row_end = 8;
    shard.cols = 1;
    shard.values.values.assign(8, 0.5f);
    caf::scoped_actor self{client_sys};
    bool created = false;
    self->request(remote, 5s, create_atom_v, shard)
      .receive([&](uint64_t) { created = true; }, [](caf::error&) {});
    REQUIRE(created);
    link = open_data_link(client_sys, remote, where(), nullptr, nullptr, 5s,
                          "test link", link_opts);
  }

  host_port where() const {
    return host_port{"127.0.0.1", door->port()};
  }

  ~link_fixture() {
    caf::anon_send_exit(link, caf::exit_reason::user_shutdown);
    door.reset();
    caf::anon_send_exit(ps, caf::exit_reason::user_shutdown);
  }

  /// A pull of the dense values through `via`: the reply or the error.
  std::pair<pull_reply, caf::error> pull(ps_actor via, uint32_t group = 0) {
    caf::scoped_actor self{client_sys};
    pull_request req;
    req.group = group;
    std::pair<pull_reply, caf::error> out;
    self->request(via, 5s, pull_atom_v, req)
      .receive([&](pull_reply& r) { out.first = std::move(r); },
               [&](caf::error& e) { out.second = std::move(e); });
    return out;
  }
};

} // namespace

TEST_CASE("data frames decode to what was encoded", "[data]") {
  system_fixture f;
  push_request push;
  push.group = 3;
  push.view = 7;
  push.read_clock = 11;
  push.id = update_id{2, 1, 99};
  push.gradient.values = {1.5f, -2.0f, 3.25f};
  table_rows t;
  t.shard = 4;
  t.keys.keys = {10, 20};
  t.values.values = {0.1f, 0.2f};
  push.tables.push_back(t);
  auto out = encode(f.sys, 42, push);
  CHECK(out.bulk_bytes == 3 * sizeof(float));
  auto in = as_received(out);
  CHECK(in.header.kind == frame_kind::push);
  CHECK(in.header.id == 42);
  auto back = decode_push(f.sys, in);
  CHECK(back.group == 3);
  CHECK(back.view == 7);
  CHECK(back.read_clock == 11);
  CHECK(back.id.closure == 99);
  CHECK(std::vector<float>(back.gradient.values.begin(),
                           back.gradient.values.end())
        == std::vector<float>{1.5f, -2.0f, 3.25f});
  REQUIRE(back.tables.size() == 1);
  CHECK(back.tables[0].keys.keys == std::vector<uint64_t>{10, 20});

  pull_reply reply;
  reply.clock = 5;
  reply.shared_values = std::make_shared<const std::vector<float>>(
    std::vector<float>{3.0f, 4.0f, 5.0f});
  reply.shared_offset = 1;
  reply.shared_count = 2;
  auto reply_in = as_received(encode(f.sys, 9, reply));
  auto r = decode_pull_reply(f.sys, reply_in);
  CHECK(r.clock == 5);
  CHECK(std::vector<float>(r.values.values.begin(), r.values.values.end())
        == std::vector<float>{4.0f, 5.0f});

  CHECK(decode_clock(as_received(encode_clock(8, 1234))) == 1234);
  auto err = caf::make_error(errc::stale_view, "group", 1);
  auto e = decode_error(f.sys, as_received(encode_error(f.sys, 1, err)));
  CHECK(e == err);
}

TEST_CASE("malformed data frames are refused, naming the problem", "[data]") {
  system_fixture f;
  auto refused = [](const std::string& h) {
    return parse_frame_header(h.data());
  };
  CHECK_THROWS_WITH(refused(header_with("XPSF", 1, 0, 0)),
                    Catch::Contains("not a data frame"));
  CHECK_THROWS_WITH(refused(header_with("APSF", 9, 0, 0)),
                    Catch::Contains("unknown kind 9"));
  CHECK_THROWS_WITH(refused(header_with("APSF", 1, max_frame_meta + 1, 0)),
                    Catch::Contains("bytes of meta"));
  CHECK_THROWS_WITH(refused(header_with("APSF", 2, 0, 6)),
                    Catch::Contains("whole floats"));
  CHECK_THROWS_WITH(refused(header_with("APSF", 2, 0, max_frame_bulk + 4)),
                    Catch::Contains("whole floats, at most"));
  CHECK_THROWS_WITH(refused(header_with("APSF", 1, 0, 8)),
                    Catch::Contains("a pull frame announces 8 bytes of bulk"));
  // A meta cut short, and one with bytes left over.
  auto in = as_received(encode(f.sys, 1, pull_request{}));
  in.meta.pop_back();
  CHECK_THROWS_AS(decode_pull(f.sys, in), input_error);
  auto extra = as_received(encode(f.sys, 1, pull_request{}));
  extra.meta.push_back('x');
  CHECK_THROWS_WITH(decode_pull(f.sys, extra),
                    Catch::Contains("1 bytes after its meta"));
  // A frame of the wrong kind for its decoder.
  CHECK_THROWS_WITH(decode_push(f.sys, extra),
                    Catch::Contains("expected a push frame, got a pull"));
}

TEST_CASE("a data frame of every kind whose meta is cut short or has bytes "
          "left over is refused, naming its kind",
          "[data]") {
  system_fixture f;
  // One frame of each kind, something in every field its meta carries.
  table_rows rows;
  rows.shard = 2;
  rows.keys.keys = {5, 6};
  rows.values.values = {0.5f, -0.5f};
  pull_request pull;
  pull.group = 1;
  pull.tables.push_back(table_rows{2, key_buffer{{5, 6}}, {}});
  pull.format = "bf16";
  push_request push;
  push.id = update_id{1, 0, 3};
  push.gradient.values = {1.0f, 2.0f};
  push.tables.push_back(rows);
  pull_reply reply;
  reply.clock = 9;
  reply.values.values = {3.0f};
  reply.tables.push_back(rows);
  std::vector<out_frame> frames;
  frames.push_back(encode(f.sys, 1, pull));
  frames.push_back(encode(f.sys, 2, push));
  frames.push_back(encode(f.sys, 3, reply));
  frames.push_back(encode_clock(4, 0x0102030405060708));
  frames.push_back(encode_error(f.sys, 5, caf::make_error(errc::stale_view,
                                                          "group", 1)));
  // The decoder of the frame's kind, on a copy (decoders take the bulk).
  auto decode = [&](const in_frame& in) {
    auto copy = in;
    switch (copy.header.kind) {
      case frame_kind::pull:
        decode_pull(f.sys, copy);
        break;
      case frame_kind::push:
        decode_push(f.sys, copy);
        break;
      case frame_kind::pull_reply:
        decode_pull_reply(f.sys, copy);
        break;
      case frame_kind::push_reply:
        decode_clock(copy);
        break;
      case frame_kind::error:
        decode_error(f.sys, copy);
        break;
    }
  };
  const std::map<frame_kind, std::string> names{
    {frame_kind::pull, "pull frame"},
    {frame_kind::push, "push frame"},
    {frame_kind::pull_reply, "pull reply frame"},
    {frame_kind::push_reply, "push reply frame"},
    {frame_kind::error, "error frame"},
  };
  for (auto& out : frames) {
    auto whole = as_received(out);
    auto name = names.at(whole.header.kind);
    INFO(name << " of " << whole.meta.size() << " bytes of meta");
    REQUIRE(whole.meta.size() > 1);
    CHECK_NOTHROW(decode(whole));
    auto with_meta = [&](size_t n) {
      auto in = whole;
      in.meta.resize(n, '\0');
      in.header.meta_bytes = static_cast<uint32_t>(n);
      return in;
    };
    for (size_t n = 0; n < whole.meta.size(); ++n) {
      INFO("cut to " << n << " bytes");
      CHECK_THROWS_AS(decode(with_meta(n)), input_error);
      CHECK_THROWS_WITH(decode(with_meta(n)), Catch::Contains(name));
    }
    for (size_t extra : {1, 8}) {
      INFO(extra << " bytes more");
      auto n = whole.meta.size() + extra;
      CHECK_THROWS_AS(decode(with_meta(n)), input_error);
      CHECK_THROWS_WITH(decode(with_meta(n)), Catch::Contains(name));
    }
  }
  // What the refusals say, for a push reply (its meta is the clock's 8
  // bytes) and for an error cut inside its context, which CAF's
  // deserializer alone reads as the error without its context.
  auto clock = as_received(encode_clock(4, 17));
  clock.meta.resize(7);
  CHECK_THROWS_WITH(decode_clock(clock),
                    Catch::Contains("push reply frame has 7 bytes of meta, "
                                    "not 8"));
  clock.meta.resize(9);
  CHECK_THROWS_WITH(decode_clock(clock),
                    Catch::Contains("push reply frame has 9 bytes of meta, "
                                    "not 8"));
  auto error = as_received(encode_error(f.sys, 5, caf::make_error(
                                                    errc::stale_view, "group",
                                                    1)));
  size_t context_cut = 0;
  for (size_t n = 0; n < error.meta.size(); ++n) {
    auto cut = error;
    cut.meta.resize(n);
    try {
      decode_error(f.sys, cut);
    } catch (const input_error& e) {
      std::string what = e.what();
      if (what.find("its context is cut short") != std::string::npos)
        ++context_cut;
    }
  }
  CHECK(context_cut > 0);
}

TEST_CASE("pulls and pushes through a data link give what BASP gives, "
          "through shared memory and over TCP",
          "[data]") {
  auto transport = GENERATE(link_transport::automatic, link_transport::tcp);
  auto before = data_link_census();
  data_link_options opts;
  opts.transport = transport;
  link_fixture f{data_session_options{}, opts};
  // Both ends in this process, on this host: auto settles on shared memory.
  auto now = data_link_census();
  bool shm = transport == link_transport::automatic;
  CHECK(now.shm == before.shm + (shm ? 1 : 0));
  CHECK(now.tcp == before.tcp + (shm ? 0 : 1));
  auto [direct, derr] = f.pull(f.remote);
  auto [linked, lerr] = f.pull(f.link);
  REQUIRE(!derr);
  REQUIRE(!lerr);
  CHECK(std::vector<float>(linked.values.values.begin(),
                           linked.values.values.end())
        == std::vector<float>(8, 0.5f));
  CHECK(linked.clock == direct.clock);
  // A push through the f.link is applied (sgd at rate 1: 0.5 - 0.25).
  caf::scoped_actor self{f.client_sys};
  push_request p;
  p.id = update_id{0, 0, 1};
  p.gradient.values.assign(8, 0.25f);
  uint64_t clock = 0;
  self->request(f.link, 5s, push_atom_v, p)
    .receive([&](uint64_t c) { clock = c; }, [](caf::error&) {});
  CHECK(clock == 1);
  auto [after, aerr] = f.pull(f.remote);
  REQUIRE(!aerr);
  CHECK(std::vector<float>(after.values.values.begin(),
                           after.values.values.end())
        == std::vector<float>(8, 0.25f));
  // The same update again is a duplicate: not applied twice.
  self->request(f.link, 5s, push_atom_v, p)
    .receive([&](uint64_t c) { clock = c; }, [](caf::error&) {});
  CHECK(clock == 1);
  // An error comes back as the same error.
  auto [x, direct_err] = f.pull(f.remote, 5);
  auto [y, link_err] = f.pull(f.link, 5);
  REQUIRE(direct_err);
  CHECK(link_err == direct_err);
  // A pull with table keys goes over BASP: the same answer.
  pull_request with_keys;
  table_rows keys;
  keys.shard = 3;
  keys.keys.keys = {1, 2};
  with_keys.tables.push_back(keys);
  caf::error direct_table_err;
  caf::error link_table_err;
  self->request(f.remote, 5s, pull_atom_v, with_keys)
    .receive([](pull_reply&) {}, [&](caf::error& e) { direct_table_err = e; });
  self->request(f.link, 5s, pull_atom_v, with_keys)
    .receive([](pull_reply&) {}, [&](caf::error& e) { link_table_err = e; });
  REQUIRE(direct_table_err);
  CHECK(link_table_err == direct_table_err);
  // A push of the wrong size is refused as over BASP.
  push_request wrong = p;
  wrong.id.closure = 2;
  wrong.gradient.values.assign(3, 1.0f);
  caf::error direct_push_err;
  caf::error link_push_err;
  self->request(f.remote, 5s, push_atom_v, wrong)
    .receive([](uint64_t) {}, [&](caf::error& e) { direct_push_err = e; });
  self->request(f.link, 5s, push_atom_v, wrong)
    .receive([](uint64_t) {}, [&](caf::error& e) { link_push_err = e; });
  REQUIRE(direct_push_err);
  CHECK(link_push_err == direct_push_err);
}

TEST_CASE("a data link of transport shm is refused when the server "
          "declines shared memory, naming why",
          "[data]") {
  data_session_options server;
  server.shared_memory = false; // transport tcp at the server
  link_fixture f{server, data_link_options{link_transport::tcp}};
  data_link_options shm;
  shm.transport = link_transport::shm;
  auto before = data_link_census();
  CHECK_THROWS_WITH(open_data_link(f.client_sys, f.remote, f.where(), nullptr,
                                   nullptr, 5s, "worker 0 -> ps 0", shm),
                    Catch::Contains("worker 0 -> ps 0: cluster.transport is "
                                    "shm, but the frames cannot go through "
                                    "shared memory: the peer declined"));
  auto after = data_link_census();
  CHECK(after.shm == before.shm);
  CHECK(after.tcp == before.tcp);
  // The server goes on serving the link it has.
  auto [r, err] = f.pull(f.link);
  CHECK(!err);
  CHECK(r.values.values.size() == 8);
  CHECK(parse_link_transport("shm") == link_transport::shm);
  CHECK_THROWS_WITH(parse_link_transport("udp"),
                    Catch::Contains("expected auto, tcp or shm"));
}

TEST_CASE_METHOD(link_fixture,
                 "a peer sending garbage on a data channel is closed, the "
                 "server keeps serving",
                 "[data]") {
  dial_result out;
  auto ch = detail::open_channel(where(), std::chrono::steady_clock::now() + 5s,
                                 nullptr, nullptr, channel_data, out);
  REQUIRE(ch);
  // The channel starts with the shared-memory offer (here: none, TCP),
  // answered by the server; then the frames.
  char offer[shm_offer_size] = {'S', 'H', 'M', 'O'};
  REQUIRE(send(ch->fd(), offer, sizeof(offer), MSG_NOSIGNAL)
          == static_cast<ssize_t>(sizeof(offer)));
  auto answer = test::recv_exact(ch->fd(), shm_answer_size);
  CHECK(answer.substr(0, 4) == "SHMA");
  CHECK(answer[4] == 0);
  std::string garbage = header_with("JUNK", 1, 0, 0);
  REQUIRE(send(ch->fd(), garbage.data(), garbage.size(), MSG_NOSIGNAL)
          == static_cast<ssize_t>(garbage.size()));
  pollfd p{ch->fd(), POLLIN, 0};
  REQUIRE(poll(&p, 1, 5000) == 1);
  char c;
  CHECK(recv(ch->fd(), &c, 1, 0) <= 0); // closed by the server
  auto [r, err] = pull(link);
  CHECK(!err);
  CHECK(r.values.values.size() == 8);
}

TEST_CASE_METHOD(link_fixture, "a data link ends when its server is down",
                 "[data]") {
  caf::scoped_actor self{client_sys};
  self->monitor(link);
  caf::anon_send_exit(ps, caf::exit_reason::kill);
  bool down = false;
  self->receive([&](caf::down_msg&) { down = true; },
                caf::after(5s) >> [] {});
  CHECK(down);
}

TEST_CASE("a server closes a data channel idle for its timeout, and the "
          "link opens it again at its next request",
          "[data]") {
  data_session_options server;
  server.idle_timeout = 300ms;
  data_link_options never; // the link never closes its own
  link_fixture f{server, never};
  REQUIRE(f.pull(f.link).second == caf::error{});
  CHECK(f.channels->load() == 1);
  std::this_thread::sleep_for(900ms); // idle: closed by the server
  auto [reply, err] = f.pull(f.link);
  CHECK(err == caf::error{});
  CHECK(reply.values.values.size() == 8);
  CHECK(f.channels->load() == 2); // opened again
  // Busy channels stay open: requests every 100 ms for 900 ms.
  for (int i = 0; i < 9; ++i) {
    CHECK(f.pull(f.link).second == caf::error{});
    std::this_thread::sleep_for(100ms);
  }
  CHECK(f.channels->load() == 2);
}

TEST_CASE("a link closes its own idle data channel and opens it again at "
          "its next request",
          "[data]") {
  data_link_options link;
  link.idle_close = 200ms;
  link_fixture f{data_session_options{}, link};
  REQUIRE(f.pull(f.link).second == caf::error{});
  std::this_thread::sleep_for(700ms);
  auto [reply, err] = f.pull(f.link);
  CHECK(err == caf::error{});
  CHECK(reply.values.values.size() == 8);
  CHECK(f.channels->load() == 2);
}

TEST_CASE("a gate without a data handler refuses a data channel, saying why",
          "[data]") {
  system_fixture server;
  ps_options o;
  auto ps = spawn_ps(server.sys, o);
  gate door{server.sys, host_port{"127.0.0.1", 0},
            caf::actor_cast<caf::strong_actor_ptr>(ps),
            server.sys.message_types(ps), "plain ps"};
  dial_result out;
  auto ch = detail::open_channel(host_port{"127.0.0.1", door.port()},
                                 std::chrono::steady_clock::now() + 5s,
                                 nullptr, nullptr, channel_data, out);
  CHECK(!ch);
  CHECK(!out.retryable);
  CHECK_THAT(out.error, Catch::Contains("data channel, which this node does "
                                        "not serve"));
  caf::anon_send_exit(ps, caf::exit_reason::user_shutdown);
}
