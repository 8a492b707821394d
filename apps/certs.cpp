#include "apps/certs.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "cluster/net/certs.hpp"
#include "cluster/net/job_secret.hpp"
#include "cluster/spec/cluster_spec.hpp"
#include "core/error.hpp"
#include "core/job_options.hpp" // to_count
#include "core/remove_after_exit.hpp"

namespace actorps {

namespace {

constexpr const char* certs_usage = R"(usage: actorps certs --cluster SPEC.json --out DIR [--days N] [--secret]
       actorps certs --ps N --workers M --out DIR [--days N] [--secret]

Makes the certificates of a cluster for mutual TLS between its nodes: a new
CA (DIR/ca.pem, DIR/ca.key) and, for every node of the spec, a certificate
and key signed by it whose subject names the node's role and index
(OU=ps, CN=ps0): DIR/coordinator.pem, DIR/ps0.pem, DIR/worker1.pem, ...
and the matching .key files (mode 0600). Give every node the folder
(`actorps node --tls DIR ...`) or just its three files (--tls-ca, --tls-cert,
--tls-key). ca.key is needed only to add nodes later: keep it off the nodes.
With --secret, also DIR/secret: 32 random bytes (mode 0600) that every node
started with --tls DIR then proves it holds, on top of its certificate
(give it to every node; see docs/guide/security.md).

  --cluster FILE   cluster spec (TF_CONFIG shape); its addresses do not matter
  --ps N           instead of --cluster: N parameter servers ...
  --workers M      ... and M workers
  --out DIR        where to write (created; must not hold a ca.pem yet)
  --days N         validity in days (default 365)
  --secret         also write a job secret, DIR/secret
)";

uint32_t count_of(const std::string& flag, const std::string& value,
                  uint32_t lo, uint32_t hi) {
  return static_cast<uint32_t>(to_count(flag, value, lo, hi));
}

} // namespace

int run_certs(const std::vector<std::string>& args) {
  std::string spec_file;
  std::string out;
  int days = 365;
  std::optional<uint32_t> ps;
  std::optional<uint32_t> workers;
  bool secret = false;
  for (size_t i = 0; i < args.size(); ++i) {
    auto& a = args[i];
    if (a == "-h" || a == "--help") {
      std::fputs(certs_usage, stdout);
      return 0;
    }
    if (a == "--secret") {
      secret = true;
      continue;
    }
    if (i + 1 >= args.size())
      throw input_error(fmt::format("{}: {} (see actorps certs --help)", a,
                                    a.rfind("--", 0) == 0 ? "missing value"
                                                          : "unknown argument"));
    auto& v = args[++i];
    if (a == "--cluster")
      spec_file = v;
    else if (a == "--out")
      out = v;
    else if (a == "--days")
      days = static_cast<int>(count_of(a, v, 1, 36500));
    else if (a == "--ps")
      ps = count_of(a, v, 1, 1024);
    else if (a == "--workers")
      workers = count_of(a, v, 1, 1024);
    else
      throw input_error(fmt::format("unknown argument \"{}\" (see actorps "
                                    "certs --help)",
                                    a));
  }
  if (out.empty())
    throw input_error("--out DIR: where to write the certificates");
  std::vector<node_identity> nodes;
  if (!spec_file.empty()) {
    if (ps || workers)
      throw input_error("--cluster and --ps/--workers: give one of them");
    nodes = nodes_of(load_cluster_spec(spec_file));
  } else if (ps && workers) {
    nodes = nodes_of(*ps, *workers);
  } else {
    throw input_error("give --cluster SPEC.json, or --ps N and --workers M");
  }
  auto files = make_cluster_certs(out, nodes, days);
  if (secret) {
    auto file = (out.back() == '/' ? out : out + "/") + "secret";
    job_secret::write_new(file);
    files.push_back(file);
  }
  fmt::print("a new CA and {} node certificates, valid {} days{}:\n",
             nodes.size(), days, secret ? ", and a job secret" : "");
  for (auto& f : files)
    fmt::print("  {}\n", f);
  return 0;
}

std::string private_run_dir(const char* stem) {
  auto* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp")
                      + "/actorps-" + stem + "-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) // mode 0700
    throw runtime_failure(fmt::format("cannot create {}: {}", templ,
                                      std::strerror(errno)));
  remove_after_exit({templ});
  return templ;
}


launch_certs::launch_certs(uint32_t ps, uint32_t workers)
  : dir_(private_run_dir("tls")) {
  try {
    auto nodes = nodes_of(ps, workers);
    namespace fs = std::filesystem;
    // The CA in a folder of its own, which no node gets: its key signs the
    // certificates of workers that join later (add_worker).
    auto ca = fs::path{dir_} / "ca";
    make_cluster_certs(ca.string(), {}, 7);
    fs::permissions(ca, fs::perms::owner_all);
    add_node_certs(ca.string(), dir_, nodes, 7);
    // Each node gets a folder with its own key, its certificate and the
    // CA's certificate, nothing else.
    for (auto& n : nodes)
      give_node_folder(n.name());
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

void launch_certs::give_node_folder(const std::string& name) {
  namespace fs = std::filesystem;
  auto mine = fs::path{dir_} / name;
  fs::create_directory(mine);
  fs::permissions(mine, fs::perms::owner_all);
  fs::copy_file(fs::path{dir_} / "ca" / "ca.pem", mine / "ca.pem");
  for (auto ext : {".pem", ".key"}) {
    fs::rename(fs::path{dir_} / (name + ext), mine / (name + ext));
    fs::permissions(mine / (name + ext),
                    fs::perms::owner_read | fs::perms::owner_write);
  }
}

std::string launch_certs::add_worker(uint32_t index) {
  node_identity n{"worker", index};
  add_node_certs(dir_ + "/ca", dir_, {n}, 7);
  give_node_folder(n.name());
  return dir_of(n.name());
}

launch_certs::~launch_certs() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

launch_secret::launch_secret() : dir_(private_run_dir("secret")) {
  try {
    job_secret::write_new(file());
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

launch_secret::~launch_secret() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

} // namespace actorps
