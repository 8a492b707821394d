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

/// Sends `xs` to `dest` and waits up to `timeout` for one reply of type T.
/// A plain send, not a request: the reply comes back as a message, so the
/// same receive sees `dest`'s down_msg and a lost actor fails at once (a
/// request to a remote actor whose node died would wait for its timeout).
/// @throws runtime_failure "`what`: <error | lost: reason | no answer>".
template <class T, class Handle, class... Ts>
T ask(caf::actor_system& sys, const Handle& dest, const std::string& what,
      std::chrono::seconds timeout, Ts&&... xs) {
  caf::scoped_actor self{sys};
  self->monitor(dest);
  self->send(dest, std::forward<Ts>(xs)...);
  T result;
  std::string failure;
  self->receive(
    [&](T& x) { result = std::move(x); },
    [&](caf::error& err) { failure = sys.render(err); },
    [&](caf::down_msg& dm) { failure = "lost: " + sys.render(dm.reason); },
    caf::after(timeout) >> [&] {
      failure = fmt::format("no answer within {} s", timeout.count());
    });
  if (!failure.empty())
    throw runtime_failure(fmt::format("{}: {}", what, failure));
  return result;
}

} // namespace actorps::detail
