#pragma once

// Runs actors on the thread that makes them ready: a data connection's
// thread (cluster/net/frame_pump.hpp) that hands a frame to its actor runs that
// actor itself, and every actor it makes ready in turn (the worker after
// its link, the ps after its session), instead of waking a scheduler
// thread for each. On 2 cores with five processes that saved a third of
// the context switches of a loopback `launch` (15.6 -> 10.5 per step) and
// made it 8% faster (median of 12 rounds; docs/guide/data-channel.md). CAF
// still runs each actor on
// one thread at a time (its mailbox decides who runs it); what changes is
// only which thread. Internal.

#include "caf/fwd.hpp"

namespace actorps::detail {

/// Enqueues `content` to `whom`; if that makes `whom` ready, runs it on the
/// calling thread, and with it every actor that becomes ready through the
/// messages they send, until none is left (CAF's execution_unit contract:
/// an actor that sends to an idle one hands it to the sender's unit). Call
/// it only from a thread that no actor runs on and that may block as long
/// as those actors compute (a pump's thread: its socket waits
/// meanwhile). Called again while the calling thread's unit runs (from an
/// actor it runs), it only enqueues.
void run_here(const caf::strong_actor_ptr& whom, caf::message content);

} // namespace actorps::detail
