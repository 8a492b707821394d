#include "apps/serve.hpp"

#include <csignal>
#include <cstdio>
#include <functional>

#include <fmt/format.h>

#include <pthread.h>
#include <signal.h>

#include "cluster/serve/model_watcher.hpp"
#include "cluster/serve/prediction_server.hpp"
#include "cluster/serve/serve_metrics.hpp"
#include "core/error.hpp"
#include "core/job_options.hpp" // to_count
#include "core/log.hpp"

namespace actorps {

namespace {

/// A parsed `actorps serve` command line.
struct serve_command {
  std::string model_dir;
  serve_options server;
  /// How often MODEL_DIR is looked at for a newer version; 0: never.
  std::chrono::milliseconds poll{1000};
  /// The cluster's certificates (`actorps certs`): serve HTTPS with
  /// DIR/NODE.pem and DIR/NODE.key.
  std::string tls_dir;
  std::string tls_node = "coordinator";
  /// Clients must present a certificate of DIR/ca.pem.
  bool tls_mutual = false;
};

/// One flag: its name, what its value is, its help (with the default of a
/// fresh serve_command), how it sets the command.
struct serve_flag {
  const char* name;
  const char* value; ///< nullptr: a switch
  const char* help;
  std::function<std::string(const serve_command&)> shown;
  std::function<void(serve_command&, const std::string& flag,
                     const std::string& value)>
    set;
};

const std::vector<serve_flag>& serve_flags() {
  using cmd = serve_command;
  using str = const std::string&;
  static const std::vector<serve_flag> flags = {
    {"--port", "P", "TCP port (0: a free one, printed)",
     [](const cmd& c) { return std::to_string(c.server.port); },
     [](cmd& c, str f, str v) {
       c.server.port = static_cast<uint16_t>(to_count(f, v, 0, 65535));
     }},
    {"--host", "ADDR", "address to listen on (0.0.0.0: every interface)",
     [](const cmd& c) { return c.server.host; },
     [](cmd& c, str, str v) { c.server.host = v; }},
    {"--name", "NAME", "the model's name in the paths (default: the "
                       "export's)",
     nullptr, [](cmd& c, str, str v) { c.server.name = v; }},
    {"--poll-ms", "MS", "look for a newer version every MS ms (0: never)",
     [](const cmd& c) { return std::to_string(c.poll.count()); },
     [](cmd& c, str f, str v) {
       c.poll = std::chrono::milliseconds{to_count(f, v, 0, 86'400'000)};
     }},
    {"--max-batch-rows", "N", "rows per predict call, batching requests",
     [](const cmd& c) {
       return std::to_string(c.server.batching.max_batch_rows);
     },
     [](cmd& c, str f, str v) {
       c.server.batching.max_batch_rows = to_count(f, v, 1, 1 << 20);
     }},
    {"--batch-wait-us", "US", "how long a request waits for others to "
                              "batch with (0: none)",
     [](const cmd& c) {
       return std::to_string(c.server.batching.max_wait.count());
     },
     [](cmd& c, str f, str v) {
       c.server.batching.max_wait = std::chrono::microseconds{
         to_count(f, v, 0, 1'000'000)};
     }},
    {"--batch-threads", "N", "threads running predict calls",
     [](const cmd& c) { return std::to_string(c.server.batching.threads); },
     [](cmd& c, str f, str v) {
       c.server.batching.threads = static_cast<uint32_t>(to_count(f, v, 1, 256));
     }},
    {"--max-queued-rows", "N", "rows waiting at most; more: 503",
     [](const cmd& c) {
       return std::to_string(c.server.batching.max_queued_rows);
     },
     [](cmd& c, str f, str v) {
       c.server.batching.max_queued_rows = to_count(f, v, 1, uint64_t{1} << 32);
     }},
    {"--max-instances", "N", "instances per request; more: 413",
     [](const cmd& c) {
       return std::to_string(c.server.limits.max_instances);
     },
     [](cmd& c, str f, str v) {
       c.server.limits.max_instances = to_count(f, v, 1, 1 << 20);
     }},
    {"--max-body-bytes", "N", "request body size; larger: 413",
     [](const cmd& c) { return std::to_string(c.server.max_body_bytes); },
     [](cmd& c, str f, str v) {
       c.server.max_body_bytes = to_count(f, v, 64, uint64_t{1} << 30);
     }},
    {"--http-threads", "N", "connections served at once",
     [](const cmd& c) { return std::to_string(c.server.http_threads); },
     [](cmd& c, str f, str v) {
       c.server.http_threads = static_cast<uint32_t>(to_count(f, v, 1, 4096));
     }},
    {"--timeout-s", "S", "read and write timeout of a connection",
     [](const cmd& c) {
       return std::to_string(c.server.read_timeout.count());
     },
     [](cmd& c, str f, str v) {
       c.server.read_timeout = std::chrono::seconds{to_count(f, v, 1, 3600)};
       c.server.write_timeout = c.server.read_timeout;
     }},
    {"--tls-dir", "DIR", "serve HTTPS with the cluster's certificates "
                         "(actorps certs): DIR/NODE.pem, DIR/NODE.key",
     nullptr, [](cmd& c, str, str v) { c.tls_dir = v; }},
    {"--tls-node", "NODE", "whose certificate of --tls-dir",
     [](const cmd& c) { return c.tls_node; },
     [](cmd& c, str, str v) { c.tls_node = v; }},
    {"--tls-mutual", nullptr, "clients must present a certificate of "
                              "DIR/ca.pem",
     nullptr, [](cmd& c, str, str) { c.tls_mutual = true; }},
  };
  return flags;
}

std::string serve_usage() {
  std::string out = R"(usage: actorps serve MODEL_DIR [flags]

Answers TensorFlow Serving's REST API with the newest version of the export
in MODEL_DIR (folders named by version, as actorps export writes them) and
switches to a newer version when one lands, without failing a request:
  POST /v1/models/NAME:predict   {"instances": [...]} -> {"predictions": [...]}
  GET  /v1/models/NAME           the version serving (AVAILABLE)
  GET  /v1/models/NAME/metadata  what an instance holds
  GET  /healthz, GET /metrics    health, Prometheus metrics
See docs/guide/serving.md and docs/reference/serving.md.

)";
  serve_command defaults;
  for (auto& f : serve_flags()) {
    auto head = fmt::format("  {} {}", f.name, f.value ? f.value : "");
    auto help = std::string{f.help};
    if (f.shown)
      help += fmt::format(" (default {})", f.shown(defaults));
    out += fmt::format("{:<24}{}\n", head, help);
  }
  out += fmt::format("{:<24}{}\n", "  -h, --help", "this text");
  return out;
}

serve_command parse_serve_args(const std::vector<std::string>& args,
                               bool& help) {
  serve_command c;
  for (size_t i = 0; i < args.size(); ++i) {
    auto& a = args[i];
    if (a == "-h" || a == "--help") {
      help = true;
      return c;
    }
    if (a.rfind("--", 0) != 0) {
      if (!c.model_dir.empty())
        throw input_error(fmt::format("unknown argument {} (one MODEL_DIR; "
                                      "see actorps serve --help)",
                                      actorps::quoted(a)));
      c.model_dir = a;
      continue;
    }
    const serve_flag* flag = nullptr;
    for (auto& f : serve_flags())
      if (a == f.name)
        flag = &f;
    if (!flag)
      throw input_error(fmt::format("unknown flag {} (see actorps serve "
                                    "--help)",
                                    actorps::quoted(a)));
    std::string value;
    if (flag->value) {
      if (i + 1 >= args.size())
        throw input_error(fmt::format("{}: missing value {}", a,
                                      flag->value));
      value = args[++i];
    }
    flag->set(c, a, value);
  }
  if (c.model_dir.empty())
    throw input_error("MODEL_DIR: the export folder to serve (see actorps "
                      "serve --help)");
  if (c.tls_mutual && c.tls_dir.empty())
    throw input_error("--tls-mutual: needs --tls-dir");
  if (!c.tls_dir.empty()) {
    c.server.tls_cert = c.tls_dir + "/" + c.tls_node + ".pem";
    c.server.tls_key = c.tls_dir + "/" + c.tls_node + ".key";
    if (c.tls_mutual)
      c.server.tls_client_ca = c.tls_dir + "/ca.pem";
  }
  return c;
}

} // namespace

int run_serve(const std::vector<std::string>& args) {
  bool help = false;
  auto cmd = parse_serve_args(args, help);
  if (help) {
    std::fputs(serve_usage().c_str(), stdout);
    return 0;
  }
  // SIGINT and SIGTERM are taken by sigwait below: blocked here, before any
  // thread starts, so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  serve_metrics metrics;
  model_watcher models{cmd.model_dir,
                       [](const std::string& dir) {
                         return servable::load(dir);
                       },
                       cmd.poll,
                       [&metrics](uint64_t version, const std::string& e) {
                         metrics.loaded(version, e);
                       }};
  prediction_server server{models, metrics, cmd.server};
  auto now = models.current();
  fmt::print("serving {} version {} on {}://{}:{}/v1/models/{}\n",
             server.name(), now->version(), server.scheme(), cmd.server.host,
             server.port(), server.name());
  std::fflush(stdout);
  log::info("serve", -1,
            "{}: batches of up to {} rows, waiting up to {} us; {}",
            cmd.model_dir, cmd.server.batching.max_batch_rows,
            cmd.server.batching.max_wait.count(),
            cmd.poll.count() > 0
              ? fmt::format("a newer version is looked for every {} ms",
                            cmd.poll.count())
              : std::string{"no polling (--poll-ms 0)"});
  int sig = 0;
  sigwait(&stop_signals, &sig);
  log::info("serve", -1, "{}: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
  return 0;
}

} // namespace actorps
