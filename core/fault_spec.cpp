#include "core/fault_spec.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

bool changes_servers(const fault_spec& f) {
  return f.role == "ps"
         && (f.action == fault_spec::kind::move
             || f.action == fault_spec::kind::join
             || f.action == fault_spec::kind::leave);
}

fault_spec parse_fault(const std::string& text) {
  auto bad = [&](const std::string& why) -> input_error {
    return input_error(fmt::format("--fault \"{}\": {} (expected ACTION:ROLE:"
                                   "INDEX@STEP[:SECONDS], e.g. kill:worker:1@40 "
                                   "or stop:ps:0@100:2.5, or drop:ps:10%@50, "
                                   "delay:ps:20%@50:0.05, join:worker@80, "
                                   "leave:worker:1@120, move:ps:0>2@300, "
                                   "join:ps@200, leave:ps:0@400)",
                                   text, why));
  };
  auto at = text.find('@');
  if (at == std::string::npos)
    throw bad("no @STEP");
  auto head = text.substr(0, at);
  auto tail = text.substr(at + 1);
  auto number = [&](const std::string& s, const char* what) -> uint64_t {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos
        || s.size() > 12)
      throw bad(fmt::format("{} \"{}\" is not a whole number", what, s));
    return std::stoull(s);
  };
  auto server = [&](const std::string& s, const char* what) -> uint32_t {
    auto n = number(s, what);
    if (n > std::numeric_limits<uint32_t>::max())
      throw bad(fmt::format("{} {} is out of range (at most {})", what, n,
                            std::numeric_limits<uint32_t>::max()));
    return static_cast<uint32_t>(n);
  };
  if (head == "join:ps" || head == "join:worker") {
    // A new node gets the next index: none is given.
    fault_spec f;
    f.action = fault_spec::kind::join;
    f.role = head.substr(5);
    f.step = number(tail, "step");
    return f;
  }
  if (head.rfind("join:", 0) == 0 && head.find(':', 5) == std::string::npos)
    throw bad("join adds a worker or a parameter server: join:worker@STEP "
              "or join:ps@STEP");
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
  else if (action == "move")
    f.action = fault_spec::kind::move;
  else if (action == "leave")
    f.action = fault_spec::kind::leave;
  else if (action == "join")
    throw bad("join takes no index: join:worker@STEP or join:ps@STEP (the "
              "new node gets the next index)");
  else if (action != "kill")
    throw bad("unknown action \"" + action + "\"");
  bool messages = f.action == fault_spec::kind::drop
                  || f.action == fault_spec::kind::delay;
  f.role = head.substr(c1 + 1, c2 - c1 - 1);
  if (f.role != "worker" && f.role != "ps")
    throw bad("unknown role \"" + f.role + "\"");
  if (f.action == fault_spec::kind::move && f.role != "ps")
    throw bad("a move acts on parameter servers: role ps");
  if (f.action == fault_spec::kind::move) {
    auto arrow_text = head.substr(c2 + 1);
    auto arrow = arrow_text.find('>');
    if (arrow == std::string::npos)
      throw bad("a move names its servers as FROM>TO, e.g. move:ps:0>2@300");
    f.index = server(arrow_text.substr(0, arrow), "index");
    f.to = server(arrow_text.substr(arrow + 1), "index");
    if (f.index == f.to)
      throw bad("a move goes to another server");
  } else if (messages) {
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
    f.index = server(head.substr(c2 + 1), "index");
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
  if ((f.action == fault_spec::kind::kill
       || f.action == fault_spec::kind::drop
       || f.action == fault_spec::kind::error
       || f.action == fault_spec::kind::move
       || f.action == fault_spec::kind::join
       || f.action == fault_spec::kind::leave)
      && c3 != std::string::npos)
    throw bad("a kill, drop, error, move, join or leave takes no seconds");
  if (f.action == fault_spec::kind::error && f.role != "worker")
    throw bad("an error fault makes a worker's step throw: role worker");
  return f;
}

std::string to_string(const fault_spec& f) {
  static const char* names[] = {"kill",  "stop", "drop", "delay",
                                "error", "move", "join", "leave"};
  auto action = names[static_cast<int>(f.action)];
  std::string out;
  if (f.action == fault_spec::kind::join)
    out = fmt::format("join:{}@{}", f.role, f.step);
  else if (f.action == fault_spec::kind::drop
      || f.action == fault_spec::kind::delay)
    out = fmt::format("{}:{}:{}%@{}", action, f.role,
                      static_cast<int>(f.share * 100 + 0.5), f.step);
  else if (f.action == fault_spec::kind::move)
    out = fmt::format("move:{}:{}>{}@{}", f.role, f.index, f.to, f.step);
  else
    out = fmt::format("{}:{}:{}@{}", action, f.role, f.index, f.step);
  if (f.action == fault_spec::kind::stop
      || f.action == fault_spec::kind::delay)
    out += fmt::format(":{}", f.seconds);
  return out;
}

uint32_t servers_ever(const std::vector<fault_spec>& faults, uint32_t ps,
                      uint32_t max_ps) {
  auto joins = std::count_if(faults.begin(), faults.end(),
                             [](const fault_spec& f) {
                               return f.action == fault_spec::kind::join
                                      && f.role == "ps";
                             });
  return std::max(ps + static_cast<uint32_t>(joins), max_ps);
}

std::string check_server_plan(const std::vector<fault_spec>& faults,
                              uint32_t ps, size_t* position) {
  std::vector<size_t> order(faults.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return faults[a].step < faults[b].step;
  });
  // Each server: 1 serving, 2 left.
  std::vector<int> there(ps, 1);
  auto serving = [&] {
    return std::count(there.begin(), there.end(), 1);
  };
  auto name = [&](uint32_t p) -> std::string {
    if (p >= there.size())
      return fmt::format("ps {} does not exist then (the job has {} "
                         "parameter servers at that step)",
                         p, there.size());
    return fmt::format("ps {} left the job before", p);
  };
  for (auto i : order) {
    auto& f = faults[i];
    if (f.role != "ps")
      continue;
    if (position != nullptr)
      *position = i;
    bool indexed = f.action != fault_spec::kind::join
                   && f.action != fault_spec::kind::drop
                   && f.action != fault_spec::kind::delay;
    if (indexed && (f.index >= there.size() || there[f.index] != 1))
      return name(f.index);
    switch (f.action) {
      case fault_spec::kind::join:
        there.push_back(1);
        break;
      case fault_spec::kind::move:
        if (f.to >= there.size() || there[f.to] != 1)
          return name(f.to);
        if (f.to == f.index)
          return "a move goes to another server";
        break;
      case fault_spec::kind::leave:
        if (serving() == 1)
          return fmt::format("ps {} is the last parameter server: its "
                             "replicas would be the last copy of their "
                             "groups, with nowhere to go",
                             f.index);
        there[f.index] = 2;
        break;
      default:
        break;
    }
  }
  return {};
}

} // namespace actorps
