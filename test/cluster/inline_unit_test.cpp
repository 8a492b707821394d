// Actors run on the thread that makes them ready (cluster/net/inline_unit.hpp):
// the actor a plain thread hands a message, and the actor that one sends
// to, both run on that thread; each still runs one message at a time.

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "caf/actor_system.hpp"
#include "caf/event_based_actor.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"

#include "cluster/net/inline_unit.hpp"
#include "cluster/job/system_config.hpp"

using namespace actorps;
using namespace std::chrono_literals;

TEST_CASE("run_here runs the actor it tells, and the actors that one makes "
          "ready, on the calling thread",
          "[data]") {
  system_config cfg{1};
  caf::actor_system sys{cfg};
  std::mutex mtx;
  std::condition_variable cv;
  std::thread::id first_ran, second_ran;
  bool done = false;
  // A string is a ping (answered); an int is the work (no answer).
  auto second = sys.spawn([&](caf::event_based_actor*) -> caf::behavior {
    return {
      [](const std::string& ping) { return ping; },
      [&](int) {
        std::lock_guard<std::mutex> guard{mtx};
        second_ran = std::this_thread::get_id();
        done = true;
        cv.notify_all();
      },
    };
  });
  auto first = sys.spawn([&, second](caf::event_based_actor* self)
                           -> caf::behavior {
    return {
      [](const std::string& ping) { return ping; },
      [&, self, second](int x) {
        first_ran = std::this_thread::get_id();
        self->send(second, x);
      },
    };
  });
  {
    // Both started and idle (waiting for messages) before the test.
    caf::scoped_actor self{sys};
    for (auto& a : {first, second})
      self->request(a, caf::infinite, std::string{"ping"})
        .receive([](const std::string&) {},
                 [](caf::error&) { FAIL("no answer to a ping"); });
    std::this_thread::sleep_for(50ms);
  }
  std::thread::id caller;
  std::thread t([&] {
    caller = std::this_thread::get_id();
    detail::run_here(caf::actor_cast<caf::strong_actor_ptr>(first),
                     caf::make_message(1));
  });
  t.join();
  {
    std::unique_lock<std::mutex> guard{mtx};
    REQUIRE(cv.wait_for(guard, 10s, [&] { return done; }));
  }
  CHECK(first_ran == caller);
  CHECK(second_ran == caller);
  caf::anon_send_exit(first, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(second, caf::exit_reason::user_shutdown);
}
