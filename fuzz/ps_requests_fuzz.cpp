// Fuzz target: what a parameter server does with requests a peer sent: each
// deserialised as BASP would (create_shard, pull_request, push_request,
// replicate_request, replica_config, ps_snapshot for install and restore,
// and the bare numbers of stats, save, prune and the sync round's flush),
// then handled by a real ps actor (actors/ps_actor.hpp) with real dense
// regions and table stores, on CAF's deterministic scheduler.
//
// Input: one byte of options (mode async, sync or ssp; the dense and table
// update rules), then requests, each one byte of kind and a 2-byte
// (little-endian) length of its serialised arguments. Before them the server
// holds, in group 0 at view 0: a dense shard of 5 x 3 floats, table shard 1
// (rows of 4 floats, any key) and table shard 2 (rows of 2 floats, keys
// below 100), for two workers.
//
// Properties: the server never dies (an exception in a handler would kill
// it) and never crashes; a push, pull, install or restore it refuses with an
// error leaves the group unchanged (values, slots, tables, clock and
// counters), as ps_actor.hpp promises.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"
#include "caf/others.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "actors/messages.hpp"
#include "actors/ps_actor.hpp"
#include "fuzz/fuzz_system.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

namespace {

/// What the harness's mailbox held after a request ran.
struct replies {
  size_t errors = 0;
  size_t values = 0;
};

class harness {
public:
  harness() : sys_(fuzz::fuzz_system()), self_(sys_) {
    // nop
  }

  /// Spawns the server of one input and creates its shards.
  void start(uint8_t opts) {
    static const char* rules[] = {"sgd", "momentum", "adagrad", "adam",
                                  "ftrl"};
    ps_options o;
    o.mode = static_cast<consistency>(opts % 3);
    o.optimizer = optimizer_config{rules[(opts / 3) % 5], 0.1f, {}};
    o.table_optimizer = optimizer_config{rules[(opts / 15) % 5], 0.1f, {}};
    o.workers = 2;
    ps_ = spawn_ps(sys_, o);
    self_->monitor(ps_);
    fuzz::sched().run();
    create_shard dense;
    dense.variable = "w";
    dense.row_end = 5;
    dense.cols = 3;
    dense.values.values.resize(15);
    for (size_t i = 0; i < 15; ++i)
      dense.values.values[i] = 0.1f * static_cast<float>(i);
    fuzz::check(ask(create_atom_v, dense).errors == 0,
                "the harness's dense shard was refused");
    for (uint32_t shard : {1u, 2u}) {
      create_shard t;
      t.variable = shard == 1 ? "emb" : "small";
      t.shard = shard;
      t.table = true;
      t.cols = shard == 1 ? 4 : 2;
      t.vocabulary = shard == 1 ? 0 : 100;
      t.init_scale = 0.5f;
      t.seed = 7;
      fuzz::check(ask(create_atom_v, t).errors == 0,
                  "the harness's table shard was refused");
    }
  }

  /// Stops the server of this input (after firing its timers: sync rounds
  /// that waited for their timeout close).
  void stop() {
    fuzz::sched().trigger_timeouts();
    fuzz::sched().run();
    drain();
    self_->demonitor(ps_.address());
    caf::anon_send_exit(ps_, caf::exit_reason::user_shutdown);
    fuzz::sched().run();
    drain();
  }

  /// Everything in the harness's mailbox, counted; fail()s on a down
  /// message (the server died).
  replies drain() {
    replies r;
    bool more = true;
    while (more)
      self_->receive(
        [&](caf::error&) { ++r.errors; },
        [&](caf::down_msg& dm) {
          fuzz::fail("the parameter server died: " + sys_.render(dm.reason));
        },
        caf::others >> [&](caf::message_view&) -> caf::result<caf::message> {
          ++r.values;
          return caf::message{};
        },
        caf::after(std::chrono::seconds(0)) >> [&] { more = false; });
    return r;
  }

  /// Group `g`'s state as bytes (snapshot and counters but the process's
  /// memory), or "" if the server does not hold the group.
  std::string state_of(uint32_t g) {
    drain();
    std::string out;
    self_->send(ps_, save_atom_v, g);
    self_->send(ps_, stats_atom_v, g);
    fuzz::sched().run();
    for (int i = 0; i < 2; ++i)
      self_->receive(
        [&](ps_snapshot& snap) { out += bytes_of(snap); },
        [&](ps_stats& st) {
          st.peak_rss_bytes = 0;
          out += bytes_of(st);
        },
        [&](caf::error&) {},
        caf::after(std::chrono::seconds(0)) >> [] {
          fuzz::fail("the parameter server did not answer save or stats");
        });
    return out;
  }

  /// Sends `xs` as the harness (replies come back here), runs the server
  /// and counts the replies.
  template <class... Ts>
  replies ask(Ts&&... xs) {
    self_->send(ps_, std::forward<Ts>(xs)...);
    fuzz::sched().run();
    return drain();
  }

  caf::actor_system& sys() {
    return sys_;
  }

private:
  template <class T>
  std::string bytes_of(T& x) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys_, buf};
    if (auto err = sink(x))
      fuzz::fail("cannot serialise the server's state");
    return std::string(buf.begin(), buf.end());
  }

  caf::actor_system& sys_;
  caf::scoped_actor self_;
  ps_actor ps_;
};

harness& the_harness() {
  static auto* h = new harness;
  return *h;
}

/// Deserialises `xs` from `bytes`; false if the bytes are refused (BASP
/// drops such a message).
template <class... Ts>
bool load(const std::string& bytes, Ts&... xs) {
  caf::binary_deserializer src{the_harness().sys(), bytes.data(),
                               bytes.size()};
  return !src(xs...);
}

/// Sends a request that must leave group `g` unchanged when refused.
template <class... Ts>
void ask_unchanged_on_error(harness& h, uint32_t g, const char* what,
                            Ts&&... xs) {
  auto before = h.state_of(g);
  auto r = h.ask(std::forward<Ts>(xs)...);
  if (r.errors > 0 && !before.empty())
    fuzz::check(h.state_of(g) == before,
                (std::string{"a refused "} + what + " changed the server")
                  .c_str());
}

/// Whether replicate requests are sent. They are since replicate() in
/// actors/ps_actor.cpp checks a forwarded update as push() checks a push:
/// before that, a gradient of the wrong size read past its buffer
/// (heap-buffer-overflow) and an unknown table shard threw
/// std::out_of_range, which killed the server. Regression inputs:
/// fuzz/corpus/ps_requests/crash_replicate_*.
constexpr bool fuzz_replicate = true;

void run_request(harness& h, uint8_t kind, const std::string& bytes) {
  switch (kind % 11) {
    case 0: {
      create_shard x;
      if (load(bytes, x))
        h.ask(create_atom_v, std::move(x));
      break;
    }
    case 1: {
      pull_request x;
      if (load(bytes, x)) {
        auto g = x.group;
        ask_unchanged_on_error(h, g, "pull", pull_atom_v, std::move(x));
      }
      break;
    }
    case 2: {
      push_request x;
      if (load(bytes, x)) {
        auto g = x.group;
        ask_unchanged_on_error(h, g, "push", push_atom_v, std::move(x));
      }
      break;
    }
    case 3: {
      replicate_request x;
      if (fuzz_replicate && load(bytes, x))
        h.ask(replicate_atom_v, std::move(x));
      break;
    }
    case 4: {
      replica_config x;
      if (load(bytes, x))
        h.ask(configure_atom_v, std::move(x));
      break;
    }
    case 5: {
      uint32_t g = 0;
      uint64_t view = 0;
      ps_snapshot x;
      if (load(bytes, g, view, x))
        ask_unchanged_on_error(h, g, "install", install_atom_v, g, view,
                               std::move(x));
      break;
    }
    case 6: {
      uint32_t g = 0;
      if (load(bytes, g))
        h.ask(stats_atom_v, g);
      break;
    }
    case 7: {
      uint32_t g = 0;
      if (load(bytes, g))
        h.ask(save_atom_v, g);
      break;
    }
    case 8: {
      uint32_t g = 0;
      ps_snapshot x;
      if (load(bytes, g, x))
        ask_unchanged_on_error(h, g, "restore", restore_atom_v, g,
                               std::move(x));
      break;
    }
    case 9: {
      uint64_t first = 0;
      uint64_t watermark = 0;
      if (load(bytes, first, watermark))
        h.ask(prune_atom_v, first, watermark);
      break;
    }
    default: {
      // The sync round's own timeout message; any peer can send it.
      uint32_t g = 0;
      uint64_t round = 0;
      if (load(bytes, g, round))
        h.ask(caf::flush_atom_v, g, round);
      break;
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  auto& h = the_harness();
  h.start(in.u8());
  while (in.left() > 0) {
    auto kind = in.u8();
    run_request(h, kind, in.sized(true));
  }
  h.stop();
  return 0;
}
