#include "cluster/net/inline_unit.hpp"

#include <deque>
#include <limits>
#include <memory>

#include "caf/actor_control_block.hpp"
#include "caf/actor_system.hpp"
#include "caf/execution_unit.hpp"
#include "caf/message.hpp"
#include "caf/message_id.hpp"
#include "caf/resumable.hpp"

namespace actorps::detail {

namespace {

/// A thread's own execution unit: a queue of ready actors it resumes itself
/// (what caf::scheduler::worker does for a scheduler thread).
class inline_unit : public caf::execution_unit {
public:
  explicit inline_unit(caf::actor_system* sys) : caf::execution_unit(sys) {
  }

  /// Called by CAF with an actor this unit's actors made ready, which holds
  /// a reference for the unit (released once the actor is done or waits).
  void exec_later(caf::resumable* job) override {
    jobs_.push_back(job);
  }

  bool running() const {
    return running_;
  }

  /// Resumes ready actors until none is left.
  void run() {
    running_ = true;
    while (!jobs_.empty()) {
      auto* job = jobs_.front();
      jobs_.pop_front();
      switch (job->resume(this, std::numeric_limits<size_t>::max())) {
        case caf::resumable::resume_later:
          jobs_.push_back(job);
          break;
        case caf::resumable::done:
        case caf::resumable::awaiting_message:
        case caf::resumable::shutdown_execution_unit:
          intrusive_ptr_release(job);
          break;
      }
    }
    running_ = false;
  }

private:
  std::deque<caf::resumable*> jobs_;
  bool running_ = false;
};

} // namespace

void run_here(const caf::strong_actor_ptr& whom, caf::message content) {
  // One unit per thread and actor system (a test may run several systems).
  thread_local std::unique_ptr<inline_unit> unit;
  auto* sys = whom->home_system;
  if (unit && unit->running()) {
    // From an actor this thread runs: its unit takes `whom` if it is idle.
    whom->enqueue(nullptr, caf::make_message_id(), std::move(content),
                  &unit->system() == sys ? unit.get() : nullptr);
    return;
  }
  if (!unit || &unit->system() != sys)
    unit = std::make_unique<inline_unit>(sys);
  whom->enqueue(nullptr, caf::make_message_id(), std::move(content),
                unit.get());
  unit->run();
}

} // namespace actorps::detail
