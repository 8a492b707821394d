#include "cluster/job/system_config.hpp"

#include <algorithm>
#include <thread>

#include <malloc.h>

#include "caf/io/middleman.hpp"

#include "actors/messages.hpp"
#include "core/error.hpp"

namespace actorps {

system_config::system_config(uint32_t threads) {
  // Pulls and pushes allocate buffers of about a megabyte per step. glibc
  // would serve each from fresh mmap'd pages that the kernel must fault in and
  // zero (15% of the run time in a profile); keep them on the heap instead.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  add_message_types<caf::id_block::actorps>();
  add_error_category(caf::atom("actorps"),
                     [](uint8_t code, caf::atom_value, const caf::message& ctx) {
                       auto text = "actorps::"
                                   + to_string(static_cast<errc>(code));
                       if (!ctx.empty())
                         text += caf::deep_to_string(ctx);
                       return text;
                     });
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  set("scheduler.max-threads", static_cast<size_t>(threads));
  // CAF's default, work stealing, polls and then sleeps when idle: every
  // message to an idle system waited up to about 0.1 ms for a thread (1K
  // pull in one process: 0.137 -> 0.049 ms, between processes 0.29 -> 0.15
  // ms). The sharing policy wakes a thread at once. Training throughput was
  // the same in one process (119-120k samples/s both) and higher across
  // processes (25k -> 32k).
  set("scheduler.policy", caf::atom("sharing"));
}

system_config::system_config(uint32_t threads, const network_options& net)
  : system_config(threads == 0 ? 1 : threads) {
  // A node runs one main actor (a ps, a worker, or the dispatcher), so one
  // scheduler thread by default.
  load<caf::io::middleman>();
  // Deserialise incoming messages on the multiplexer thread instead of
  // handing each to a BASP worker thread: one thread switch less per
  // message. Between two processes (p50 of a 1M-float push): 1M floats
  // 3.2 -> 2.5 ms, the whole model 0.7 -> 0.5 ms; training unchanged.
  // (Larger socket buffers and more consecutive reads gave nothing.)
  // Besides the kernel's two socket copies, BASP passes over a 1M-float
  // payload three times: serialising it into the scribe's write buffer,
  // zero-filling the read buffer to the payload's size
  // (stream::prepare_next_read, 9% of a push's profile), and
  // deserialising it; none can be skipped without a scribe of our own.
  // Without the zero-fill (an experimental build whose vector<char> grew
  // without it) the push p50 stayed the same, 3.10 vs 3.07 ms over 11
  // alternating runs each: it overlaps the sender's copy into the socket.
  set("middleman.workers", size_t{0});
  if (net.heartbeat_interval.count() > 0) {
    set("middleman.heartbeat-interval",
        caf::timespan{net.heartbeat_interval});
    set("middleman.connection-timeout", caf::timespan{net.heartbeat_timeout});
  }
}

} // namespace actorps
