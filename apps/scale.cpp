#include "apps/scale.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/job_options.hpp" // to_count
#include "core/exit_codes.hpp"

namespace actorps {

namespace {

constexpr const char* scale_usage = R"(usage: actorps scale [--socket PATH] (--workers N | --ps M | --leave-ps N | --status)

Changes the workers or parameter servers of a running `actorps launch` of
this user, and waits until the change is done:
  --workers N    N workers in service: new ones join the job (it needs
                 --sharding dynamic), or the highest indices leave gracefully
  --ps M         M parameter servers in service: idle ones (launch --max-ps)
                 join and groups move to them, or the newest are drained
  --leave-ps N   drain parameter server N (its groups move), then it exits 0
  --status       print what is in service
  --socket PATH  the job's scale socket (launch prints it); default: the one
                 launch of this user in $TMPDIR (or /tmp)
  --timeout S    give up waiting after S seconds (default 300)
Exit status: 0 done, 2 refused (the reason is printed; the job goes on),
1 failed or no answer. See docs/guide/elasticity.md.
)";

/// The scale sockets of this user's launches in $TMPDIR.
std::vector<std::string> find_sockets() {
  auto* tmp = std::getenv("TMPDIR");
  std::string dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& entry : std::filesystem::directory_iterator{dir, ec}) {
    auto name = entry.path().filename().string();
    if (name.rfind("actorps-control-", 0) != 0)
      continue;
    auto sock = entry.path() / "scale.sock";
    struct stat st = {};
    if (::stat(sock.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)
        && st.st_uid == ::geteuid())
      out.push_back(sock.string());
  }
  return out;
}

uint32_t count_of(const std::string& flag, const std::string& value) {
  return static_cast<uint32_t>(to_count(flag, value, 0, 1024));
}

} // namespace

int run_scale(const std::vector<std::string>& args) {
  std::string socket_path;
  nlohmann::json request;
  int timeout_s = 300;
  for (size_t i = 0; i < args.size(); ++i) {
    auto& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(scale_usage, stdout);
      return 0;
    }
    if (flag == "--status") {
      request["status"] = true;
      continue;
    }
    if (i + 1 >= args.size())
      throw input_error(fmt::format("{}: needs a value, or unknown flag\n{}",
                                    flag, scale_usage));
    auto& value = args[++i];
    if (flag == "--socket")
      socket_path = value;
    else if (flag == "--workers")
      request["workers"] = count_of(flag, value);
    else if (flag == "--ps")
      request["ps"] = count_of(flag, value);
    else if (flag == "--leave-ps")
      request["leave_ps"] = count_of(flag, value);
    else if (flag == "--timeout")
      timeout_s = static_cast<int>(std::max(1u, count_of(flag, value)));
    else
      throw input_error(fmt::format("unknown flag {}\n{}", flag, scale_usage));
  }
  if (request.size() != 1)
    throw input_error(fmt::format("give one of --workers, --ps, --leave-ps, "
                                  "--status\n{}",
                                  scale_usage));
  if (socket_path.empty()) {
    auto found = find_sockets();
    if (found.empty())
      throw input_error("no running actorps launch of this user found (no "
                        "actorps-control-*/scale.sock in $TMPDIR or /tmp); "
                        "give --socket PATH, which launch prints");
    if (found.size() > 1)
      throw input_error(fmt::format("{} launches of this user run; say which "
                                    "with --socket: {}",
                                    found.size(), fmt::join(found, ", ")));
    socket_path = found.front();
  }
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path))
    throw input_error(fmt::format("--socket {}: path too long", socket_path));
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0
      || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    auto err = std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
    throw input_error(fmt::format("no running job at {}: {}", socket_path,
                                  err));
  }
  auto text = request.dump() + "\n";
  if (::send(fd, text.data(), text.size(), MSG_NOSIGNAL)
      != static_cast<ssize_t>(text.size())) {
    ::close(fd);
    throw input_error(fmt::format("{}: cannot send: {}", socket_path,
                                  std::strerror(errno)));
  }
  // Answers, a JSON object per line, until launch closes the connection.
  std::string pending;
  std::string state;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  char buf[1024];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  until - std::chrono::steady_clock::now())
                  .count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
      fmt::print(stderr, "actorps scale: no answer within {} s (the command "
                         "may still complete; see launch's output)\n",
                 timeout_s);
      ::close(fd);
      return exit_failed;
    }
    auto n = ::read(fd, buf, sizeof(buf));
    if (n <= 0)
      break;
    pending.append(buf, static_cast<size_t>(n));
    for (auto nl = pending.find('\n'); nl != std::string::npos;
         nl = pending.find('\n')) {
      auto line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      try {
        auto j = nlohmann::json::parse(line);
        state = j.at("state").get<std::string>();
        auto message = j.at("message").get<std::string>();
        if (state == "refused")
          fmt::print(stderr, "actorps: error: scale refused: {}\n", message);
        else
          fmt::print("{}: {}\n", state, message);
      } catch (const std::exception&) {
        fmt::print(stderr, "actorps scale: an answer it cannot read: {}\n",
                   line);
      }
    }
  }
  ::close(fd);
  std::fflush(stdout);
  if (state == "done")
    return 0;
  if (state == "refused")
    return exit_bad_input;
  if (state.empty())
    fmt::print(stderr, "actorps scale: launch closed the connection without "
                       "an answer\n");
  return exit_failed;
}

} // namespace actorps
