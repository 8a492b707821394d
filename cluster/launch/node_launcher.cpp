#include "cluster/launch/node_launcher.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cluster/launch/slurm_launcher.hpp"
#include "cluster/launch/child_process.hpp"
#include "core/error.hpp"
#include "core/remove_after_exit.hpp"

namespace actorps {

node_launcher::~node_launcher() = default;

std::vector<uint16_t> pick_free_ports(size_t n, const std::string& host) {
  using detail::errno_text;
  using detail::unique_fd;
  in_addr addr;
  if (::inet_pton(AF_INET, host.c_str(), &addr) != 1)
    throw runtime_failure(
      fmt::format("pick_free_ports: \"{}\" is not an IPv4 address", host));
  std::vector<unique_fd> sockets;
  std::vector<uint16_t> ports;
  for (size_t i = 0; i < n; ++i) {
    unique_fd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    if (!fd)
      throw runtime_failure(fmt::format("pick_free_ports: socket: {}",
                                        errno_text(errno)));
    sockaddr_in sa = {};
    sa.sin_family = AF_INET;
    sa.sin_addr = addr;
    sa.sin_port = 0;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
      throw runtime_failure(fmt::format("pick_free_ports: cannot bind {}:0: {}",
                                        host, errno_text(errno)));
    socklen_t len = sizeof(sa);
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0)
      throw runtime_failure(fmt::format("pick_free_ports: getsockname: {}",
                                        errno_text(errno)));
    // Ports are distinct: the kernel never hands out a port that one of the
    // sockets still open here is bound to (none uses SO_REUSEPORT).
    ports.push_back(ntohs(sa.sin_port));
    sockets.push_back(std::move(fd));
  }
  return ports;
}

namespace {

/// A cluster spec in a temporary file, removed with this object.
class spec_file {
public:
  spec_file() {
    auto dir = std::getenv("TMPDIR");
    path_ = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp")
            + "/actorps-cluster-XXXXXX.json";
    int fd = mkstemps(path_.data(), 5);
    if (fd < 0)
      throw runtime_failure("cannot create " + path_ + ": "
                            + std::strerror(errno));
    close(fd);
    // Also when this launcher is killed (SIGKILL runs no destructor).
    remove_after_exit({path_, path_ + ".tmp"});
  }

  spec_file(const spec_file&) = delete;
  spec_file& operator=(const spec_file&) = delete;

  ~spec_file() {
    std::remove(path_.c_str());
  }

  /// Replaces the file's content (the path stays), atomically.
  void write(const std::string& json) {
    auto tmp = path_ + ".tmp";
    auto* f = std::fopen(tmp.c_str(), "w");
    auto text = json + "\n";
    bool ok = f != nullptr
              && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (f != nullptr)
      ok = std::fclose(f) == 0 && ok;
    if (!ok || std::rename(tmp.c_str(), path_.c_str()) != 0)
      throw runtime_failure("cannot write " + path_);
  }

  const std::string& path() const {
    return path_;
  }

private:
  std::string path_;
};

/// Nodes as child processes of this one, on free ports of one address.
class local_launcher : public node_launcher {
public:
  explicit local_launcher(std::string host) : host_(std::move(host)) {
    // nop
  }

  cluster_spec place(uint32_t ps, uint32_t workers, uint32_t) override {
    // Free now; a port another program takes before its node listens makes
    // the node fail at once, and run_launch tries again (a new attempt).
    auto ports = pick_free_ports(1 + size_t{ps} + workers, host_);
    cluster_spec spec;
    size_t next = 0;
    spec.chief.push_back({host_, ports[next++]});
    for (uint32_t i = 0; i < ps; ++i)
      spec.ps.push_back({host_, ports[next++]});
    for (uint32_t i = 0; i < workers; ++i)
      spec.worker.push_back({host_, ports[next++]});
    file_.write(spec.to_json());
    return spec;
  }

  child_spec wrap(const task_id&, child_spec process) const override {
    // Right after "--index I", as the command lines always were (a user's
    // `pgrep -f "node --role ps --index 0 --cluster FILE"` finds a node).
    auto add = [&](std::vector<std::string>& argv) {
      if (argv.empty())
        return;
      auto at = argv.begin() + std::min<size_t>(6, argv.size());
      argv.insert(at, {"--cluster", file_.path()});
    };
    add(process.argv);
    add(process.restart_argv);
    return process;
  }

  std::string describe() const override {
    return fmt::format("on {}; cluster spec {}", host_, file_.path());
  }

private:
  std::string host_;
  spec_file file_;
};

/// One launcher by name. Adding one: an entry here.
struct launcher_entry {
  const char* name;
  std::unique_ptr<node_launcher> (*make)(const launcher_options&);
};

constexpr launcher_entry registry[] = {
  {"local", make_local_launcher},
  {"slurm", make_slurm_launcher},
};

} // namespace

std::unique_ptr<node_launcher> make_local_launcher(const launcher_options& opts) {
  if (opts.port_base)
    throw input_error("--port-base: the local launcher picks free ports; "
                      "--port-base is for --launcher slurm");
  return std::make_unique<local_launcher>(opts.host.value_or("127.0.0.1"));
}

std::unique_ptr<node_launcher> make_node_launcher(const std::string& name,
                                                  const launcher_options& opts) {
  for (auto& entry : registry)
    if (name == entry.name)
      return entry.make(opts);
  std::string known;
  for (auto& entry : registry)
    known += (known.empty() ? "" : ", ") + std::string{entry.name};
  throw input_error(fmt::format("--launcher: unknown launcher \"{}\" (known: "
                                "{})",
                                name, known));
}

std::vector<std::string> node_launcher_names() {
  std::vector<std::string> names;
  for (auto& entry : registry)
    names.emplace_back(entry.name);
  return names;
}

} // namespace actorps
