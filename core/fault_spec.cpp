#include "core/fault_spec.hpp"

#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

fault_spec parse_fault(const std::string& text) {
  auto bad = [&](const std::string& why) -> input_error {
    return input_error(fmt::format("--fault \"{}\": {} (expected ACTION:ROLE:"
                                   "INDEX@STEP[:SECONDS], e.g. kill:worker:1@40 "
                                   "or stop:ps:0@100:2.5, or drop:ps:10%@50, "
                                   "delay:ps:20%@50:0.05, join:worker@80, "
                                   "leave:worker:1@120)",
                                   text, why));
  };
  auto at = text.find('@');
  if (at == std::string::npos)
    throw bad("no @STEP");
  auto head = text.substr(0, at);
  auto tail = text.substr(at + 1);
  if (head == "join:worker") // a new worker: no index
    head += ":0";
  auto c1 = head.find(':');
  auto c2 = c1 == std::string::npos ? c1 : head.find(':', c1 + 1);
  if (c2 == std::string::npos)
    throw bad("expected ACTION:ROLE:INDEX before @");
  fault_spec f;
  auto action = head.substr(0, c1);
  if (action == "stop")
    f.action = fault_spec::kind::stop;
  else if (action == "drop")
    f.action = fault_spec::kind::drop;
  else if (action == "delay")
    f.action = fault_spec::kind::delay;
  else if (action == "error")
    f.action = fault_spec::kind::error;
  else if (action == "join")
    f.action = fault_spec::kind::join;
  else if (action == "leave")
    f.action = fault_spec::kind::leave;
  else if (action != "kill")
    throw bad("unknown action \"" + action + "\"");
  bool messages = f.action == fault_spec::kind::drop
                  || f.action == fault_spec::kind::delay;
  f.role = head.substr(c1 + 1, c2 - c1 - 1);
  if (f.role != "worker" && f.role != "ps")
    throw bad("unknown role \"" + f.role + "\"");
  auto number = [&](const std::string& s, const char* what) -> uint64_t {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos
        || s.size() > 12)
      throw bad(fmt::format("{} \"{}\" is not a whole number", what, s));
    return std::stoull(s);
  };
  if (messages) {
    auto pct = head.substr(c2 + 1);
    if (pct.empty() || pct.back() != '%')
      throw bad("expected a share like 10% after the role");
    auto n = number(pct.substr(0, pct.size() - 1), "share");
    if (n == 0 || n > 100)
      throw bad("the share must be 1% to 100%");
    f.share = static_cast<double>(n) / 100.0;
    if (f.role != "ps")
      throw bad("drop and delay act on messages to the ps only");
  } else {
    auto index = number(head.substr(c2 + 1), "index");
    if (index > std::numeric_limits<uint32_t>::max())
      throw bad(fmt::format("index {} is out of range (at most {})", index,
                            std::numeric_limits<uint32_t>::max()));
    f.index = static_cast<uint32_t>(index);
  }
  auto c3 = tail.find(':');
  f.step = number(tail.substr(0, c3), "step");
  if (c3 != std::string::npos) {
    auto secs = tail.substr(c3 + 1);
    char* end = nullptr;
    f.seconds = std::strtod(secs.c_str(), &end);
    if (secs.empty() || *end != '\0' || !(f.seconds > 0) || f.seconds > 3600)
      throw bad("seconds \"" + secs + "\" is not a number in (0, 3600]");
  }
  if ((f.action == fault_spec::kind::stop
       || f.action == fault_spec::kind::delay)
      && !(f.seconds > 0))
    throw bad("a stop or delay needs :SECONDS");
  bool membership = f.action == fault_spec::kind::join
                    || f.action == fault_spec::kind::leave;
  if ((f.action == fault_spec::kind::kill
       || f.action == fault_spec::kind::drop
       || f.action == fault_spec::kind::error || membership)
      && c3 != std::string::npos)
    throw bad("a kill, drop, error, join or leave takes no seconds");
  if (f.action == fault_spec::kind::error && f.role != "worker")
    throw bad("an error fault makes a worker's step throw: role worker");
  if (membership && f.role != "worker")
    throw bad("workers join and leave a running job: role worker");
  return f;
}

std::string to_string(const fault_spec& f) {
  static const char* names[] = {"kill",  "stop", "drop", "delay",
                                 "error", "join", "leave"};
  auto action = names[static_cast<int>(f.action)];
  std::string out;
  if (f.action == fault_spec::kind::join)
    out = fmt::format("join:{}@{}", f.role, f.step);
  else if (f.action == fault_spec::kind::drop
      || f.action == fault_spec::kind::delay)
    out = fmt::format("{}:{}:{}%@{}", action, f.role,
                      static_cast<int>(f.share * 100 + 0.5), f.step);
  else
    out = fmt::format("{}:{}:{}@{}", action, f.role, f.index, f.step);
  if (f.action == fault_spec::kind::stop
      || f.action == fault_spec::kind::delay)
    out += fmt::format(":{}", f.seconds);
  return out;
}

} // namespace actorps
