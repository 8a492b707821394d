#include "apps/scale_desk.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/certs.hpp"
#include "core/error.hpp"

namespace actorps {

using detail::errno_text;
using detail::unique_fd;

namespace {

/// The coordinator's child name under launch.
constexpr const char* coordinator = "coordinator";

/// Longest request line read.
constexpr size_t max_request = 1024;

/// Reads one request line from a client that just connected (it writes it
/// at once): up to 2 s.
std::string read_request(int fd) {
  std::string text;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  char buf[256];
  while (text.find('\n') == std::string::npos && text.size() < max_request) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  until - std::chrono::steady_clock::now())
                  .count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0)
      break;
    auto n = ::read(fd, buf, sizeof(buf));
    if (n <= 0)
      break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text.substr(0, text.find('\n'));
}

/// The number in "worker 3 joined;" or "ps 2 joined the job" of a
/// coordinator's line (actors/dispatcher_members.cpp, dispatcher_moves.cpp),
/// if the line is one of them.
std::optional<uint32_t> joined(std::string_view line, std::string_view role,
                               std::string_view after) {
  auto at = line.find(role);
  while (at != std::string_view::npos) {
    auto rest = line.substr(at + role.size());
    size_t digits = 0;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9')
      ++digits;
    if (digits > 0 && digits < 8 && rest.substr(digits, after.size()) == after)
      return static_cast<uint32_t>(std::stoul(std::string{rest.substr(0, digits)}));
    at = line.find(role, at + 1);
  }
  return std::nullopt;
}

} // namespace

scale_desk::scale_desk(scale_desk_options opts)
  : opts_(std::move(opts)), dir_(private_run_dir("control")) {
  path_ = dir_ + "/scale.sock";
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof(addr.sun_path))
    throw runtime_failure(fmt::format("launch: the scale socket's path {} is "
                                      "too long for a Unix socket (set TMPDIR "
                                      "to a shorter folder)",
                                      path_));
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  listener_ = unique_fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC
                                            | SOCK_NONBLOCK,
                                 0)};
  if (!listener_
      || ::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr),
                sizeof(addr))
           != 0
      || ::listen(listener_.get(), 4) != 0)
    throw runtime_failure(fmt::format("launch: cannot listen on {}: {}",
                                      path_, errno_text(errno)));
  for (uint32_t w = 0; w < opts_.workers; ++w)
    workers_.insert(w);
  next_worker_ = opts_.workers;
  for (uint32_t p = 0; p < opts_.ps; ++p)
    servers_.insert(p);
  next_server_ = opts_.ps;
}

scale_desk::~scale_desk() {
  listener_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

int scale_desk::fd() const {
  return listener_.get();
}

void scale_desk::answer(int fd, const std::string& state,
                        const std::string& message) {
  auto text = nlohmann::json{{"state", state}, {"message", message}}.dump()
              + "\n";
  [[maybe_unused]] auto n = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
}

void scale_desk::readable(child_control& ctl) {
  for (;;) {
    unique_fd client{::accept4(listener_.get(), nullptr, nullptr,
                               SOCK_CLOEXEC)};
    if (!client)
      return; // EAGAIN: no one else waits
    // The folder is the user's alone (0700); the peer's uid is checked too.
    ucred cred = {};
    socklen_t len = sizeof(cred);
    if (::getsockopt(client.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0
        || cred.uid != ::geteuid()) {
      answer(client.get(), "refused",
             "only the user who runs this job may scale it");
      ctl.say(fmt::format("scale: refused a connection of uid {}",
                          static_cast<long>(cred.uid)));
      continue;
    }
    auto request = read_request(client.get());
    if (auto refusal = handle(ctl, request, client)) {
      answer(client.get(), "refused", *refusal);
      ctl.say(fmt::format("scale: refused {}: {}", request, *refusal));
    }
  }
}

std::optional<std::string> scale_desk::handle(child_control& ctl,
                                              const std::string& request,
                                              unique_fd& client) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(request);
  } catch (const std::exception&) {
    return std::string{"not a JSON object: " + request.substr(0, 80)};
  }
  if (!j.is_object() || j.size() != 1)
    return std::string{"a request has one field: workers, ps, leave_ps or "
                       "status"};
  auto [key, value] = *j.items().begin();
  if (key == "status") {
    auto in_service = workers_in_service(ctl);
    answer(client.get(), "done",
           fmt::format("{} worker(s) in service, {} ps in service, {} idle "
                       "ps left{}",
                       in_service.size(), servers_.size(),
                       opts_.servers - next_server_,
                       running_ ? "; running: " + running_->what : ""));
    return std::nullopt;
  }
  if (key != "workers" && key != "ps" && key != "leave_ps")
    return fmt::format("unknown request \"{}\" (workers, ps, leave_ps, "
                       "status)",
                       key);
  if (!value.is_number_unsigned() || value.get<uint64_t>() > 1024)
    return fmt::format("{}: a count from 0 to 1024", key);
  if (running_)
    return fmt::format("another scale command runs ({}); wait for it to end",
                       running_->what);
  if (!ctl.running(coordinator))
    return std::string{"the job is ending"};
  auto n = value.get<uint32_t>();
  running_.emplace();
  running_->started = std::chrono::steady_clock::now();
  running_->deadline = running_->started + opts_.deadline;
  std::optional<std::string> refusal;
  if (key == "workers")
    refusal = scale_workers(ctl, n);
  else if (key == "ps")
    refusal = scale_servers(ctl, n);
  else
    refusal = leave_server(ctl, n);
  if (refusal) {
    running_.reset();
    return refusal;
  }
  running_->client = std::move(client);
  answer(running_->client.get(), "accepted", running_->what);
  ctl.say("scale: " + running_->what);
  finish_if_done(ctl);
  return std::nullopt;
}

std::vector<uint32_t> scale_desk::workers_in_service(child_control& ctl) const {
  std::vector<uint32_t> out;
  for (auto w : workers_)
    if (leaving_.count(w) == 0 && ctl.running(fmt::format("worker{}", w)))
      out.push_back(w);
  return out;
}

std::optional<std::string> scale_desk::scale_workers(child_control& ctl,
                                                     uint32_t n) {
  auto in_service = workers_in_service(ctl);
  auto now = static_cast<uint32_t>(in_service.size());
  if (n == 0)
    return std::string{"0 workers would stop training; to end the job, send "
                       "SIGTERM to launch (it checkpoints and exits 75)"};
  if (n == now)
    return fmt::format("the job has {} worker(s) in service already", now);
  if (n > now && opts_.sharding != "dynamic")
    return std::string{"workers join a job of dynamic data shards only "
                       "(data.sharding dynamic, --sharding dynamic); this "
                       "job's are static"};
  if (opts_.mode != "async")
    return fmt::format("workers join and leave a job of mode async only "
                       "(this one's is {}: its rounds count a fixed set of "
                       "workers)",
                       opts_.mode);
  running_->what = fmt::format("workers {} -> {}", now, n);
  if (n > now) {
    for (uint32_t k = now; k < n; ++k) {
      auto index = next_worker_;
      child_spec spec;
      try {
        spec = opts_.new_worker(index);
        ctl.start_child(std::move(spec));
      } catch (const std::exception& e) {
        if (k == now)
          return fmt::format("worker {} could not start: {}", index, e.what());
        running_->failures.push_back(
          fmt::format("worker {} could not start: {}", index, e.what()));
        break;
      }
      ++next_worker_;
      workers_.insert(index);
      running_->worker_joins.insert(index);
    }
  } else {
    // The highest indices leave, each as on SIGTERM: it finishes its
    // closures and exits 0 (nothing re-executed).
    for (auto it = in_service.rbegin(); it != in_service.rend() && now > n;
         ++it, --now) {
      auto name = fmt::format("worker{}", *it);
      if (!ctl.signal_child(name, SIGTERM))
        continue;
      leaving_.insert(*it);
      running_->exits.insert(name);
    }
  }
  // The coordinator prints the speed before and after.
  ctl.write_line(coordinator, "mark " + running_->what);
  return std::nullopt;
}

std::optional<std::string> scale_desk::scale_servers(child_control& ctl,
                                                     uint32_t m) {
  auto now = static_cast<uint32_t>(servers_.size());
  if (m == 0)
    return std::string{"0 ps would leave the variables nowhere"};
  if (m == now)
    return fmt::format("the job has {} ps in service already", now);
  running_->what = fmt::format("ps {} -> {}", now, m);
  if (m > now) {
    auto idle = opts_.servers - next_server_;
    if (m - now > idle)
      return fmt::format("{} more ps asked, {} idle: launch started {} ps "
                         "(--max-ps; servers that left do not come back)",
                         m - now, idle, opts_.servers);
    for (uint32_t k = now; k < m; ++k) {
      auto p = next_server_++;
      if (!ctl.write_line(coordinator, "join:ps"))
        return std::string{"the coordinator does not take commands now"};
      servers_.insert(p);
      running_->server_joins.insert(p);
    }
    return std::nullopt;
  }
  // The newest servers leave first.
  std::vector<uint32_t> gone(servers_.rbegin(), servers_.rend());
  gone.resize(now - m);
  for (auto p : gone) {
    if (!ctl.write_line(coordinator, fmt::format("leave:ps:{}", p)))
      return std::string{"the coordinator does not take commands now"};
    servers_.erase(p);
    running_->exits.insert(fmt::format("ps{}", p));
  }
  return std::nullopt;
}

std::optional<std::string> scale_desk::leave_server(child_control& ctl,
                                                    uint32_t p) {
  if (servers_.count(p) == 0)
    return fmt::format("ps {} is not in service (in service: {})", p,
                       fmt::join(servers_, ", "));
  if (servers_.size() == 1)
    return fmt::format("ps {} is the last one: its variables would have "
                       "nowhere to go",
                       p);
  running_->what = fmt::format("ps {} leaves", p);
  if (!ctl.write_line(coordinator, fmt::format("leave:ps:{}", p)))
    return std::string{"the coordinator does not take commands now"};
  servers_.erase(p);
  running_->exits.insert(fmt::format("ps{}", p));
  return std::nullopt;
}

void scale_desk::line(child_control& ctl, const std::string& name,
                      std::string_view text) {
  if (!running_ || name != coordinator)
    return;
  if (auto w = joined(text, "worker ", " joined;"))
    running_->worker_joins.erase(*w);
  // A server is in once the groups it takes moved (dispatcher_moves.cpp).
  if (auto p = joined(text, "rebalanced onto ps", ":"))
    running_->server_joins.erase(*p);
  if (auto p = joined(text, "ps ", ": no group to spare"))
    running_->server_joins.erase(*p);
  finish_if_done(ctl);
}

void scale_desk::exited(child_control& ctl, const std::string& name,
                        int wait_status) {
  if (!running_)
    return;
  if (running_->exits.erase(name) > 0 && !(WIFEXITED(wait_status)
                                           && WEXITSTATUS(wait_status) == 0))
    running_->failures.push_back(
      fmt::format("{} {}", name, detail::describe_wait_status(wait_status)));
  for (auto w : running_->worker_joins)
    if (name == fmt::format("worker{}", w)) {
      running_->failures.push_back(
        fmt::format("{} {} before it joined", name,
                    detail::describe_wait_status(wait_status)));
      running_->worker_joins.erase(w);
      break;
    }
  finish_if_done(ctl);
}

void scale_desk::tick(child_control& ctl) {
  if (!running_)
    return;
  if (!ctl.running(coordinator)) {
    running_->failures.push_back("the job ended first");
  } else if (std::chrono::steady_clock::now() >= running_->deadline) {
    running_->failures.push_back(fmt::format(
      "not done within {} s", opts_.deadline.count()));
  } else {
    return;
  }
  running_->worker_joins.clear();
  running_->server_joins.clear();
  running_->exits.clear();
  finish_if_done(ctl);
}

void scale_desk::finish_if_done(child_control& ctl) {
  auto& r = *running_;
  if (!r.worker_joins.empty() || !r.server_joins.empty() || !r.exits.empty())
    return;
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                            - r.started)
                .count();
  std::string text;
  if (r.failures.empty())
    text = fmt::format("{}: done in {:.2f} s", r.what, secs);
  else
    text = fmt::format("{}: failed after {:.2f} s: {}", r.what, secs,
                       fmt::join(r.failures, "; "));
  if (r.client)
    answer(r.client.get(), r.failures.empty() ? "done" : "failed", text);
  ctl.say("scale: " + text);
  running_.reset();
}

} // namespace actorps
