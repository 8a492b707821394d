#pragma once

// The one type-id block of every message and atom actorps sends. Register it
// on every node with `cfg.add_message_types<caf::id_block::actorps>()` before
// the actor_system exists (see cluster/job/system_config.hpp). Included by
// actors/messages.hpp after the message types; include that instead.

#include "caf/type_id.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(actorps, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(actorps, (actorps::float_buffer))
  CAF_ADD_TYPE_ID(actorps, (actorps::replica_config))
  CAF_ADD_TYPE_ID(actorps, (actorps::replicate_request))
  CAF_ADD_TYPE_ID(actorps, (actorps::group_route))
  CAF_ADD_TYPE_ID(actorps, (std::vector<actorps::group_route>))
  CAF_ADD_TYPE_ID(actorps, (actorps::key_buffer))
  CAF_ADD_TYPE_ID(actorps, (actorps::table_rows))
  CAF_ADD_TYPE_ID(actorps, (actorps::pull_request))
  CAF_ADD_TYPE_ID(actorps, (actorps::table_snapshot))
  CAF_ADD_TYPE_ID(actorps, (actorps::update_id))
  CAF_ADD_TYPE_ID(actorps, (actorps::create_shard))
  CAF_ADD_TYPE_ID(actorps, (actorps::pull_reply))
  CAF_ADD_TYPE_ID(actorps, (actorps::push_request))
  CAF_ADD_TYPE_ID(actorps, (actorps::ps_stats))
  CAF_ADD_TYPE_ID(actorps, (actorps::closure_request))
  CAF_ADD_TYPE_ID(actorps, (actorps::step_result))
  CAF_ADD_TYPE_ID(actorps, (actorps::job_fingerprint))
  CAF_ADD_TYPE_ID(actorps, (actorps::handshake))
  CAF_ADD_TYPE_ID(actorps, (actorps::node_welcome))
  CAF_ADD_TYPE_ID(actorps, (actorps::ps_snapshot))
  // One atom per event; the typed interfaces say who sends which.
  // the protocol: create a variable's shard on a server
  CAF_ADD_ATOM(actorps, actorps, create_atom, "create")
  // a worker reads a group's values and rows
  CAF_ADD_ATOM(actorps, actorps, pull_atom, "pull")
  // a worker sends a closure's gradients
  CAF_ADD_ATOM(actorps, actorps, push_atom, "push")
  // a server's counters
  CAF_ADD_ATOM(actorps, actorps, stats_atom, "stats")
  // a worker runs a closure
  CAF_ADD_ATOM(actorps, actorps, run_atom, "run")
  // a closure enters the dispatcher's queue
  CAF_ADD_ATOM(actorps, actorps, schedule_atom, "schedule")
  // cancel a closure (worker) or every closure (dispatcher)
  CAF_ADD_ATOM(actorps, actorps, cancel_atom, "cancel")
  // a node introduces itself (handshake)
  CAF_ADD_ATOM(actorps, actorps, hello_atom, "hello")
  // the coordinator ends the job on a node
  CAF_ADD_ATOM(actorps, actorps, shutdown_atom, "shutdown")
  // liveness probe
  CAF_ADD_ATOM(actorps, actorps, ping_atom, "ping")
  // a worker is lost (found by other means than its actor going down)
  CAF_ADD_ATOM(actorps, actorps, lost_atom, "lost")
  // a copy of a group's state (checkpoint)
  CAF_ADD_ATOM(actorps, actorps, save_atom, "save")
  // a group takes a snapshot's state (restored checkpoint)
  CAF_ADD_ATOM(actorps, actorps, restore_atom, "restore")
  // a worker's data source moves (restored checkpoint)
  CAF_ADD_ATOM(actorps, actorps, seek_atom, "seek")
  // fault injection: stop answering for a while
  CAF_ADD_ATOM(actorps, actorps, freeze_atom, "freeze")
  // fault injection: a node SIGKILLs itself
  CAF_ADD_ATOM(actorps, actorps, kill_atom, "kill")
  // a lost worker is back (a new actor or incarnation)
  CAF_ADD_ATOM(actorps, actorps, replace_atom, "replace")
  // fault injection: hold a share of pulls and pushes back
  CAF_ADD_ATOM(actorps, actorps, chaos_atom, "chaos")
  // a proxy's own, to itself: the pull or push (or other step) it held goes
  // on now; the fault-injection proxy's after a drop's or delay's hold, the
  // simulator's link's at the virtual time a transfer ends (nothing is sent
  // twice: not a retry)
  CAF_ADD_ATOM(actorps, actorps, release_atom, "release")
  // fault injection: a worker's next step throws
  CAF_ADD_ATOM(actorps, actorps, fail_atom, "fail")
  // the chief's job setup or the dispatcher's failover sets a server's role
  // in a group
  CAF_ADD_ATOM(actorps, actorps, configure_atom, "configure")
  // a primary forwards an applied update to its backup
  CAF_ADD_ATOM(actorps, actorps, replicate_atom, "replicate")
  // a new backup takes its primary's state
  CAF_ADD_ATOM(actorps, actorps, install_atom, "install")
  // where groups are served now
  CAF_ADD_ATOM(actorps, actorps, route_atom, "route")
  // finished closure ids are forgotten
  CAF_ADD_ATOM(actorps, actorps, prune_atom, "prune")
  // a parameter server is lost (found by other means than its actor going down:
  // a remote node's silence)
  CAF_ADD_ATOM(actorps, actorps, ps_lost_atom, "ps_lost")
  // a lost parameter server is back (as an actor, with the groups it holds)
  CAF_ADD_ATOM(actorps, actorps, ps_back_atom, "ps_back")
  // a lost parameter server could not be brought back
  CAF_ADD_ATOM(actorps, actorps, ps_gone_atom, "ps_gone")
  // a group's replica on a server was built (and restored), or failed
  CAF_ADD_ATOM(actorps, actorps, replica_atom, "replica")
  // time to restart a lost worker
  CAF_ADD_ATOM(actorps, actorps, respawn_atom, "respawn")
  // a worker's back-off (after errc::ps_lost) is over
  CAF_ADD_ATOM(actorps, actorps, backoff_atom, "backoff")
  // the no-worker grace period is over
  CAF_ADD_ATOM(actorps, actorps, grace_atom, "grace")
  // time for a worker to dial a lost server again
  CAF_ADD_ATOM(actorps, actorps, redial_atom, "redial")
  // the outcome of a dial of a lost node (worker, coordinator's watcher)
  CAF_ADD_ATOM(actorps, actorps, dialed_atom, "dialed")
  // time for the coordinator's watcher to try a lost node again
  CAF_ADD_ATOM(actorps, actorps, rejoin_atom, "rejoin")
  // the job cannot go on: every closure fails with the error given
  CAF_ADD_ATOM(actorps, actorps, abort_atom, "abort")
  // a worker's measurement chose the wire formats of its pushes and pulls
  CAF_ADD_ATOM(actorps, actorps, formats_atom, "formats")
  // a data channel's frame pump to its actor (the data link or the data
  // session): frames, or the channel's end, wait in their inbox; in-process
  CAF_ADD_ATOM(actorps, actorps, frames_atom, "frames")
  // time for a data channel's end to check whether it has been idle
  CAF_ADD_ATOM(actorps, actorps, idle_atom, "idle")
  // a worker joins a running job (a new index): it takes closures from now
  CAF_ADD_ATOM(actorps, actorps, enlist_atom, "enlist")
  // a worker leaves gracefully: it finishes what it holds, then goes
  CAF_ADD_ATOM(actorps, actorps, leave_atom, "leave")
  // a planned move: a group's replicas on one server go to another
  CAF_ADD_ATOM(actorps, actorps, move_atom, "move")
  // a moving group's primary stops applying pushes and waits until its
  // backup (the move's target) has every update it applied
  CAF_ADD_ATOM(actorps, actorps, handoff_atom, "handoff")
  // a server forgets a group that moved away (it answers "moved" then)
  CAF_ADD_ATOM(actorps, actorps, drop_atom, "drop")
  // a new parameter server joins the running job
  CAF_ADD_ATOM(actorps, actorps, ps_join_atom, "ps_join")
  // a parameter server leaves the running job: its groups move, it stops
  CAF_ADD_ATOM(actorps, actorps, ps_drain_atom, "ps_drain")
CAF_END_TYPE_ID_BLOCK(actorps)
