#pragma once

// A blocking question to one actor that also watches it (cluster/ only).

#include <chrono>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/after.hpp"
#include "caf/scoped_actor.hpp"

#include "core/error.hpp"

namespace actorps::detail {

/// ask() failed because `dest` went down before it answered.
class lost_while_asking : public runtime_failure {
public:
  using runtime_failure::runtime_failure;
};

/// Sends `xs` to `dest` and waits up to `timeout` for one reply of type T.
/// A plain send, not a request: the reply comes back as a message, so the
/// same receive sees `dest`'s down_msg and a lost actor fails at once (a
/// request to a remote actor whose node died would wait for its timeout).
/// @throws runtime_failure "`what`: <error | lost: reason | no answer>"
///         (lost_while_asking for "lost").
template <class T, class Handle, class... Ts>
T ask(caf::actor_system& sys, const Handle& dest, const std::string& what,
      std::chrono::seconds timeout, Ts&&... xs) {
  caf::scoped_actor self{sys};
  self->monitor(dest);
  self->send(dest, std::forward<Ts>(xs)...);
  T result;
  std::string failure;
  bool lost = false;
  self->receive(
    [&](T& x) { result = std::move(x); },
    [&](caf::error& err) { failure = sys.render(err); },
    [&](caf::down_msg& dm) {
      failure = "lost: " + sys.render(dm.reason);
      lost = true;
    },
    caf::after(timeout) >> [&] {
      failure = fmt::format("no answer within {} s", timeout.count());
    });
  if (lost)
    throw lost_while_asking(fmt::format("{}: {}", what, failure));
  if (!failure.empty())
    throw runtime_failure(fmt::format("{}: {}", what, failure));
  return result;
}

} // namespace actorps::detail
