#include "core/job_config.hpp"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"

#include <map>

using namespace actorps;

#ifndef ACTORPS_SOURCE_DIR
#  error "ACTORPS_SOURCE_DIR must name the repository root"
#endif

TEST_CASE("an empty config gives the documented defaults",
          "[core][job_config]") {
  auto cfg = parse_job_config("{}");
  CHECK(cfg.source == "<string>");
  CHECK(cfg.model == "mlp");
  // No layers: the model's default for the data.
  CHECK(cfg.layers.empty());
  CHECK(cfg.model_options.empty());
  CHECK(cfg.init_seed == 42);
  CHECK(cfg.dataset == "fashion_mnist");
  CHECK(cfg.batch_size == 64);
  CHECK(cfg.workers == 2);
  CHECK(cfg.ps == 2);
  CHECK(cfg.optimizer.type == "sgd");
  CHECK(cfg.optimizer.learning_rate == 0.01f);
  CHECK(cfg.optimizer.params.empty());
  CHECK(cfg.table_optimizer.type == "adagrad");
  CHECK(cfg.table_partition_strategy == table_partition::mod);
  CHECK_FALSE(cfg.reset_lost_ps);
  CHECK_FALSE(cfg.layer_pushes);
  CHECK_FALSE(cfg.priority_pulls);
  CHECK_FALSE(cfg.prefetch);
  CHECK_FALSE(cfg.prefetch_chosen); // "auto": resolve_prefetch decides
  CHECK(cfg.cpu_policy == "batch");
  CHECK(cfg.cpu_affinity == "auto");
  CHECK(cfg.transport == "auto");
  // 0: two closures per worker between processes, one in one process.
  CHECK(cfg.closures_per_worker == 0);
  CHECK(cfg.partitioner.type == partitioner_config::kind::fixed_shards);
  // fixed_shards with num_shards 0: one shard per parameter server.
  CHECK(cfg.partitioner.num_shards == 0);
  CHECK(cfg.epochs == 10);
  CHECK(cfg.steps_per_epoch == 0);
  CHECK(cfg.mode == "async");
}

TEST_CASE("a partitioner without max_shards gets TensorFlow's default cap: "
          "1 shard for min_size, none for max_size",
          "[core][job_config]") {
  auto min_size = parse_job_config(
    R"({"partitioner": {"type": "min_size", "min_shard_bytes": 1024}})");
  CHECK(min_size.partitioner.max_shards == 0);
  CHECK(num_shards(min_size.partitioner, 784, 256) == 1);
  auto max_size = parse_job_config(
    R"({"partitioner": {"type": "max_size", "max_shard_bytes": 100352}})");
  CHECK(max_size.partitioner.max_shards == 0);
  // 100352 bytes hold 98 rows of 256 floats: 8 shards, not capped at 1.
  CHECK(num_shards(max_size.partitioner, 784, 256) == 8);
  auto capped = parse_job_config(
    R"({"partitioner": {"type": "max_size", "max_shard_bytes": 100352,
                        "max_shards": 3}})");
  CHECK(num_shards(capped.partitioner, 784, 256) == 3);
}

TEST_CASE("configs/fashion_mnist.json loads", "[core][job_config]") {
  const std::string path = ACTORPS_SOURCE_DIR "/configs/fashion_mnist.json";
  auto cfg = load_job_config(path);
  CHECK(cfg.source == path);
  CHECK(cfg.layers == std::vector<uint64_t>{784, 256, 128, 10});
  CHECK(cfg.optimizer.type == "adam");
  CHECK(cfg.optimizer.learning_rate == 0.001f);
  CHECK(cfg.workers == 2);
  CHECK(cfg.ps == 2);
  CHECK(cfg.max_queued == 4096);
}

TEST_CASE("every field of a config is read into the job config",
          "[core][job_config]") {
  auto cfg = parse_job_config(R"({
    "model": {"type": "mlp", "layers": [6, 5, 3], "seed": 7},
    "data": {"dataset": "fashion_mnist", "dir": "/data", "batch_size": 32,
             "shuffle_seed": 9, "train_limit": 1000, "test_limit": 100},
    "cluster": {"workers": 4, "ps": 3, "threads": 8, "layer_pushes": true,
                "closures_per_worker": 3, "prefetch": true,
                "priority_pulls": true,
                "cpu_policy": "normal", "cpu_affinity": "none",
                "transport": "tcp"},
    "optimizer": {"type": "momentum", "learning_rate": 0.5, "momentum": 0.5,
                  "nesterov": true},
    "table_optimizer": {"type": "ftrl", "learning_rate": 0.1, "l1": 0.01,
                        "l2": 0.02, "beta": 1, "initial_accumulator": 0.2},
    "partitioner": {"type": "max_size", "max_shard_bytes": 4096,
                    "max_shards": 5, "min_shard_bytes": 100, "num_shards": 2,
                    "table_partition": "div"},
    "training": {"epochs": 3, "steps_per_epoch": 50, "mode": "async",
                 "max_queued": 16}
  })",
                              "job.json");
  CHECK(cfg.source == "job.json");
  CHECK(cfg.layers == std::vector<uint64_t>{6, 5, 3});
  CHECK(cfg.init_seed == 7);
  CHECK(cfg.data_dir == "/data");
  CHECK(cfg.batch_size == 32);
  CHECK(cfg.shuffle_seed == 9);
  CHECK(cfg.train_limit == 1000);
  CHECK(cfg.test_limit == 100);
  CHECK(cfg.workers == 4);
  CHECK(cfg.ps == 3);
  CHECK(cfg.threads == 8);
  CHECK(cfg.layer_pushes);
  CHECK(cfg.priority_pulls);
  CHECK(cfg.prefetch);
  CHECK(cfg.prefetch_chosen);
  CHECK(cfg.closures_per_worker == 3);
  CHECK(cfg.cpu_policy == "normal");
  CHECK(cfg.cpu_affinity == "none");
  CHECK(cfg.transport == "tcp");
  CHECK(cfg.optimizer.type == "momentum");
  CHECK(cfg.optimizer.learning_rate == 0.5f);
  CHECK(cfg.optimizer.params
        == std::map<std::string, double>{{"momentum", 0.5}, {"nesterov", 1}});
  CHECK(cfg.table_optimizer.type == "ftrl");
  CHECK(cfg.table_optimizer.learning_rate == 0.1f);
  CHECK(cfg.table_optimizer.params
        == std::map<std::string, double>{{"beta", 1},
                                         {"initial_accumulator", 0.2},
                                         {"l1", 0.01},
                                         {"l2", 0.02}});
  CHECK(cfg.table_partition_strategy == table_partition::div);
  CHECK(cfg.partitioner.type == partitioner_config::kind::max_size);
  CHECK(cfg.partitioner.max_shard_bytes == 4096);
  CHECK(cfg.partitioner.max_shards == 5);
  CHECK(cfg.partitioner.min_shard_bytes == 100);
  CHECK(cfg.partitioner.num_shards == 2);
  CHECK(cfg.epochs == 3);
  CHECK(cfg.steps_per_epoch == 50);
  CHECK(cfg.max_queued == 16);
}

TEST_CASE("a field set to null keeps its default", "[core][job_config]") {
  auto cfg = parse_job_config(R"({"cluster": {"workers": null}})");
  CHECK(cfg.workers == 2);
}

TEST_CASE("malformed configs throw input_error naming the source and the "
          "field",
          "[core][job_config]") {
  struct bad_case {
    const char* json;
    const char* field; // must appear in the message
    const char* what;  // must appear in the message too
  };
  const std::vector<bad_case> cases{
    {R"({"bogus": 1})", "bogus", "unknown field"},
    {R"({"cluster": {"workers": 2, "wrkers": 3}})", "cluster.wrkers",
     "unknown field"},
    {R"({"model": []})", "model", "must be an object"},
    {R"({"cluster": {"workers": "two"}})", "cluster.workers", "whole number"},
    {R"({"cluster": {"workers": -1}})", "cluster.workers", "negative"},
    {R"({"cluster": {"workers": 0}})", "cluster.workers", "out of range"},
    {R"({"cluster": {"workers": 1025}})", "cluster.workers", "out of range"},
    {R"({"cluster": {"ps": 0}})", "cluster.ps", "out of range"},
    {R"({"data": {"batch_size": 2.5}})", "data.batch_size", "whole number"},
    {R"({"data": {"batch_size": 0}})", "data.batch_size", "out of range"},
    {R"({"data": {"dataset": "mnist"}})", "data.dataset", "mnist"},
    {R"({"data": {"dir": 3}})", "data.dir", "string"},
    {R"({"model": {"layers": "784,10"}})", "model.layers", "array"},
    {R"({"model": {"layers": [784]}})", "model.layers", "at least"},
    {R"({"model": {"layers": [784, 0, 10]}})", "model.layers[1]",
     "out of range"},
    {R"({"optimizer": {"type": "rmsprop"}})", "optimizer.type", "rmsprop"},
    {R"({"optimizer": {"learning_rate": "fast"}})", "optimizer.learning_rate",
     "number"},
    {R"({"optimizer": {"learning_rate": 0}})", "optimizer.learning_rate",
     "out of range"},
    {R"({"optimizer": {"type": "momentum", "momentum": 1.0}})",
     "optimizer.momentum", "out of range"},
    {R"({"optimizer": {"momentum": 0.9}})", "optimizer.momentum",
     "unknown field for sgd"},
    {R"({"optimizer": {"type": "momentum", "nesterov": "yes"}})",
     "optimizer.nesterov", "number or true/false"},
    {R"({"table_optimizer": {"type": "ftrl", "l1": -1}})",
     "table_optimizer.l1", "out of range"},
    {R"({"table_optimizer": {"type": "adamw"}})", "table_optimizer.type",
     "adamw"},
    {R"({"partitioner": {"table_partition": "range"}})",
     "partitioner.table_partition", "range"},
    {R"({"cluster": {"reset_lost_ps": 1}})", "cluster.reset_lost_ps",
     "true or false"},
    {R"({"cluster": {"replicas": 2}})", "cluster.replicas", "out of range"},
    {R"({"cluster": {"ps": 1, "replicas": 1}})", "cluster.replicas",
     "needs cluster.ps >= 2"},
    {R"({"cluster": {"ps": 3, "groups": 2}})", "cluster.groups",
     "at least cluster.ps"},
    {R"({"cluster": {"ps": 2, "groups": 129}})", "cluster.groups",
     "at most 64 per server"},
    {R"({"optimizer": {"type": "ftrl", "staleness_aware": true}})",
     "optimizer.staleness_aware", "use sgd, adagrad or adam"},
    {R"({"optimizer": {"staleness_aware": 1}})", "optimizer.staleness_aware",
     "must be true, false or \"auto\""},
    {R"({"training": {"divergence_factor": 0.5}})",
     "training.divergence_factor", "must be 0 (off) or above 1"},
    {R"({"cluster": {"replication": "quorum"}})", "cluster.replication",
     "must be \"chain\" or \"async\""},
    {R"({"cluster": {"replication_lag": 0}})", "cluster.replication_lag",
     "out of range"},
    {R"({"cluster": {"overlap": true}, "training": {"mode": "ssp"}})",
     "cluster.overlap", "needs training.mode \"async\""},
    {R"({"cluster": {"prefetch": true}, "training": {"mode": "sync"}})",
     "cluster.prefetch", "needs training.mode \"async\""},
    {R"({"cluster": {"prefetch": true, "overlap": true}})",
     "cluster.prefetch", "choose one"},
    {R"({"cluster": {"prefetch": 1}})", "cluster.prefetch",
     "must be true, false or \"auto\""},
    {R"({"cluster": {"overlap": "yes"}})", "cluster.overlap",
     "true or false"},
    {R"({"cluster": {"data_channel": "on"}})", "cluster.data_channel",
     "true or false"},
    {R"({"cluster": {"transport": "udp"}})", "cluster.transport",
     "\"auto\", \"tcp\" or \"shm\""},
    {R"({"cluster": {"shared_memory": false}})", "cluster.shared_memory",
     "unknown"},
    {R"({"cluster": {"cpu_policy": "fifo"}})", "cluster.cpu_policy",
     "must be \"batch\" or \"normal\""},
    {R"({"cluster": {"cpu_affinity": "cores"}})", "cluster.cpu_affinity",
     "must be \"auto\" or \"none\""},
    {R"({"cluster": {"layer_pushes": true}, "training": {"mode": "sync"}})",
     "cluster.layer_pushes", "needs training.mode \"async\""},
    {R"({"cluster": {"layer_pushes": true, "push_format": "topk:8"}})",
     "cluster.push_format", "with cluster.layer_pushes"},
    {R"({"cluster": {"layer_pushes": true, "variable_formats": {"dense_0/kernel": "topk:0.1"}}})",
     "cluster.variable_formats.dense_0/kernel", "with cluster.layer_pushes"},
    {R"({"cluster": {"layer_pushes": true, "push_format": "int8"}})",
     "cluster.push_format", "error feedback"},
    {R"({"cluster": {"pull_format": "topk:0.5"}})", "cluster.pull_format",
     "not sparsified"},
    {R"({"cluster": {"closures_per_worker": 9}})",
     "cluster.closures_per_worker", "out of range"},
    {R"({"partitioner": {"type": "round_robin"}})", "partitioner.type",
     "round_robin"},
    {R"({"partitioner": {"type": "max_size"}})",
     "partitioner.max_shard_bytes", "required"},
    {R"({"partitioner": {"min_shard_bytes": 0}})",
     "partitioner.min_shard_bytes", "out of range"},
    {R"({"training": {"mode": "bsp"}})", "training.mode",
     "must be \"async\", \"sync\" or \"ssp\""},
    {R"({"training": {"staleness": -1}})", "training.staleness",
     "must not be negative"},
    {R"({"training": {"epochs": 0}})", "training.epochs", "out of range"},
    {R"({"cluster": {"workers": 2,}})", "", "malformed JSON"},
    {R"({"cluster": )", "", "malformed JSON"},
    {"", "", "malformed JSON"},
  };
  for (auto& c : cases) {
    INFO("config " << c.json);
    CHECK_THROWS_AS(parse_job_config(c.json, "job.json"), input_error);
    CHECK_THROWS_WITH(parse_job_config(c.json, "job.json"),
                      Catch::StartsWith("job.json: ")
                        && Catch::Contains(c.field)
                        && Catch::Contains(c.what));
  }
}

TEST_CASE("a model's and a dataset's own fields are kept for them to check",
          "[core][job_config]") {
  auto cfg = parse_job_config(R"({
    "model": {"type": "embedding_mlp", "embedding_dim": 8,
              "combiner": "sum", "layerz": [1]},
    "data": {"dataset": "synthetic_ctr", "zipf": 1.2,
             "cardinalities": [10, 20]}
  })");
  // Unknown to the config itself; the model and the dataset check them (and
  // refuse "layerz"): see models/registry_test.cpp and
  // core/data_registry_test.cpp.
  CHECK(cfg.model_options
        == option_map{{"combiner", "\"sum\""},
                      {"embedding_dim", "8"},
                      {"layerz", "[1]"}});
  CHECK(cfg.data_options
        == option_map{{"cardinalities", "[10,20]"}, {"zipf", "1.2"}});
}

TEST_CASE("load_job_config names a missing file", "[core][job_config]") {
  const std::string path = "/nonexistent/actorps/job.json";
  CHECK_THROWS_AS(load_job_config(path), input_error);
  CHECK_THROWS_WITH(load_job_config(path), Catch::Contains(path));
}

TEST_CASE("validate rejects fields that command-line flags set out of range",
          "[core][job_config]") {
  job_config cfg;
  CHECK_NOTHROW(validate(cfg));
  cfg.workers = 0;
  CHECK_THROWS_WITH(validate(cfg), Catch::Contains("cluster.workers"));
  cfg = job_config{};
  cfg.mode = "hogwild";
  CHECK_THROWS_WITH(validate(cfg), Catch::Contains("training.mode"));
}

TEST_CASE("effective_steps_per_epoch covers the training set once per epoch",
          "[core][job_config]") {
  job_config cfg;
  cfg.batch_size = 64;
  cfg.workers = 2;
  // 60000 / (64 * 2) = 468.75: the partial step is dropped.
  CHECK(effective_steps_per_epoch(cfg, 60000) == 468);
  cfg.workers = 1;
  CHECK(effective_steps_per_epoch(cfg, 60000) == 937);
  // Never 0, even with fewer rows than one step takes.
  CHECK(effective_steps_per_epoch(cfg, 10) == 1);
  // An explicit count wins.
  cfg.steps_per_epoch = 5;
  CHECK(effective_steps_per_epoch(cfg, 60000) == 5);
}

TEST_CASE("fault specs parse and render back", "[core][job_config][faults]") {
  auto k = parse_fault("kill:worker:1@40");
  CHECK(k.action == fault_spec::kind::kill);
  CHECK(k.role == "worker");
  CHECK(k.index == 1);
  CHECK(k.step == 40);
  CHECK(to_string(k) == "kill:worker:1@40");
  auto s = parse_fault("stop:ps:0@100:2.5");
  CHECK(s.action == fault_spec::kind::stop);
  CHECK(s.role == "ps");
  CHECK(s.seconds == 2.5);
  CHECK(to_string(s) == "stop:ps:0@100:2.5");
  for (auto bad : {"", "kill", "kill:worker:1", "crash:worker:1@4",
                   "kill:chief:0@4", "kill:worker:x@4", "kill:worker:1@",
                   "kill:worker:1@-3", "stop:ps:0@100", "stop:ps:0@100:0",
                   "stop:ps:0@100:abc", "kill:worker:1@4:2"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_fault(bad), input_error);
  }
  auto d = parse_fault("drop:ps:10%@50");
  CHECK(d.action == fault_spec::kind::drop);
  CHECK(d.share == Approx(0.1));
  CHECK(to_string(d) == "drop:ps:10%@50");
  auto l = parse_fault("delay:ps:20%@5:0.05");
  CHECK(l.action == fault_spec::kind::delay);
  CHECK(l.seconds == Approx(0.05));
  CHECK(to_string(l) == "delay:ps:20%@5:0.05");
  for (auto bad : {"drop:ps:10@50", "drop:ps:0%@50", "drop:ps:101%@50",
                   "drop:worker:10%@50", "drop:ps:10%@50:1", "delay:ps:10%@50"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_fault(bad), input_error);
  }
  auto e = parse_fault("error:worker:1@40");
  CHECK(e.action == fault_spec::kind::error);
  CHECK(e.index == 1);
  CHECK(to_string(e) == "error:worker:1@40");
  for (auto bad : {"error:ps:0@40", "error:worker:1@40:2"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_fault(bad), input_error);
  }
  auto j = parse_fault("join:worker@80");
  CHECK(j.action == fault_spec::kind::join);
  CHECK(j.step == 80);
  CHECK(to_string(j) == "join:worker@80");
  auto v = parse_fault("leave:worker:3@120");
  CHECK(v.action == fault_spec::kind::leave);
  CHECK(v.index == 3);
  CHECK(to_string(v) == "leave:worker:3@120");
  // (join:ps and leave:ps:N are the servers' events: the next case.)
  for (auto bad : {"join:worker:1@80", "join:worker@80:1",
                   "leave:worker:1@80:2", "leave:worker@80", "join:evaluator@80"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_fault(bad), input_error);
  }
  CHECK_THROWS_WITH(parse_fault("kill:worker:1"),
                    Catch::Contains("kill:worker:1") && Catch::Contains("@STEP"));
}

TEST_CASE("planned changes of the parameter servers parse, render back and "
          "are checked in the order they fire",
          "[core][job_config][faults]") {
  auto m = parse_fault("move:ps:0>2@300");
  CHECK(m.action == fault_spec::kind::move);
  CHECK(m.index == 0);
  CHECK(m.to == 2);
  CHECK(m.step == 300);
  CHECK(to_string(m) == "move:ps:0>2@300");
  auto a = parse_fault("join:ps@200");
  CHECK(a.action == fault_spec::kind::join);
  CHECK(a.role == "ps");
  CHECK(to_string(a) == "join:ps@200");
  auto r = parse_fault("leave:ps:1@400");
  CHECK(r.action == fault_spec::kind::leave);
  CHECK(to_string(r) == "leave:ps:1@400");
  for (auto bad : {"move:ps:0@3", "move:ps:0>0@3", "move:ps:0>x@3",
                   "move:worker:0>1@3", "join:ps:2@3", "leave:ps:0@3:1",
                   "join:ps@"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_fault(bad), input_error);
  }
  auto plan = [](std::vector<std::string> texts, uint32_t ps) {
    std::vector<fault_spec> faults;
    for (auto& t : texts)
      faults.push_back(parse_fault(t));
    size_t at = 99;
    auto why = check_server_plan(faults, ps, &at);
    return why.empty() ? std::string{"ok"}
                       : std::to_string(at) + ": " + why;
  };
  // An added server has the next index from its step on.
  CHECK(plan({"join:ps@10", "move:ps:0>2@20", "kill:ps:2@30"}, 2) == "ok");
  CHECK_THAT(plan({"move:ps:0>2@20", "join:ps@30"}, 2),
             Catch::StartsWith("0: ps 2 does not exist then"));
  // Events fire by step, not in the order written.
  CHECK(plan({"move:ps:0>2@20", "join:ps@10"}, 2) == "ok");
  CHECK_THAT(plan({"leave:ps:0@10", "kill:ps:0@20"}, 2),
             Catch::StartsWith("1: ps 0 left the job before"));
  CHECK_THAT(plan({"leave:ps:0@10", "leave:ps:1@20"}, 2),
             Catch::StartsWith("1: ps 1 is the last parameter server"));
  CHECK(plan({"join:ps@5", "leave:ps:0@10", "leave:ps:1@20"}, 2) == "ok");
  CHECK(servers_ever({parse_fault("join:ps@5"), parse_fault("join:ps@6")}, 2)
        == 4);
  // The same through a job's config: exit 2 naming the event.
  CHECK_THROWS_WITH(
    parse_job_config(R"({"cluster": {"workers": 1, "ps": 2},
      "faults": [{"action": "move", "role": "ps", "index": 1, "to": 3,
                  "step": 5}]})"),
    Catch::Contains("faults[0] (move:ps:1>3@5)")
      && Catch::Contains("ps 3 does not exist then"));
  auto cfg = parse_job_config(R"({"cluster": {"workers": 1, "ps": 2},
    "faults": [{"action": "join", "role": "ps", "step": 5},
               {"action": "move", "role": "ps", "index": 1, "to": 2,
                "step": 6}]})");
  CHECK(to_string(cfg.faults[1]) == "move:ps:1>2@6");
}

TEST_CASE("the faults array is read and checked against the cluster",
          "[core][job_config][faults]") {
  auto cfg = parse_job_config(R"({"cluster": {"workers": 2, "ps": 1},
    "faults": [{"action": "kill", "role": "worker", "index": 1, "step": 7},
               {"action": "stop", "role": "ps", "index": 0, "step": 9,
                "seconds": 1.5}]})");
  REQUIRE(cfg.faults.size() == 2);
  CHECK(to_string(cfg.faults[0]) == "kill:worker:1@7");
  CHECK(to_string(cfg.faults[1]) == "stop:ps:0@9:1.5");
  CHECK_THROWS_WITH(parse_job_config(R"({"faults": {"action": "kill"}})"),
                    Catch::Contains("faults: must be an array"));
  CHECK_THROWS_WITH(parse_job_config(R"({"faults": [{"action": "crash"}]})"),
                    Catch::Contains("faults[0].action"));
  CHECK_THROWS_WITH(parse_job_config(R"({"faults": [{"bogus": 1}]})"),
                    Catch::Contains("faults[0].bogus: unknown field"));
  CHECK_THROWS_WITH(
    parse_job_config(R"({"cluster": {"workers": 2},
      "faults": [{"role": "worker", "index": 2, "step": 1}]})"),
    Catch::Contains("index 2 is out of range: the job has 2 workers"));
  CHECK_THROWS_WITH(
    parse_job_config(R"({"faults": [{"action": "stop", "role": "ps"}]})"),
    Catch::Contains("a stop or delay needs seconds > 0"));
}

TEST_CASE("cluster.tls names certificate files or turns TLS off",
          "[core][job_config]") {
  CHECK_FALSE(parse_job_config("{}").tls.given());
  auto off = parse_job_config(R"({"cluster": {"tls": "off"}})");
  CHECK(off.tls.off);
  CHECK(off.tls.given());
  auto files = parse_job_config(R"({"cluster": {"tls": {"dir": "certs",
    "ca": "ca.pem", "cert": "ps0.pem", "key": "ps0.key"}}})");
  CHECK_FALSE(files.tls.off);
  CHECK(files.tls.dir == "certs");
  CHECK(files.tls.ca == "ca.pem");
  CHECK(files.tls.cert == "ps0.pem");
  CHECK(files.tls.key == "ps0.key");
  CHECK_THROWS_WITH(parse_job_config(R"({"cluster": {"tls": "on"}})"),
                    Catch::Contains("cluster.tls: must be \"off\" or an object"));
  CHECK_THROWS_WITH(
    parse_job_config(R"({"cluster": {"tls": {"certificate": "x.pem"}}})"),
    Catch::Contains("cluster.tls.certificate: unknown field"));
}

TEST_CASE("staleness-aware steps are the default of async jobs of 32 workers "
          "or more, unless chosen, and ftrl and sync jobs keep plain steps",
          "[core][config]") {
  auto at = [](const char* text, uint32_t workers, const char* mode) {
    auto cfg = parse_job_config(text, "test.json");
    cfg.workers = workers;
    cfg.mode = mode;
    resolve_staleness_aware(cfg);
    return std::pair{cfg.optimizer.staleness_aware,
                     cfg.table_optimizer.staleness_aware};
  };
  CHECK(at("{}", 31, "async") == std::pair{false, false});
  CHECK(at("{}", 32, "async") == std::pair{true, true});
  CHECK(at("{}", 64, "sync") == std::pair{false, false});
  CHECK(at("{}", 64, "ssp") == std::pair{false, false});
  CHECK(at(R"({"optimizer": {"staleness_aware": "auto"}})", 64, "async")
        == std::pair{true, true});
  CHECK(at(R"({"optimizer": {"staleness_aware": false}})", 64, "async")
        == std::pair{false, true});
  CHECK(at(R"({"optimizer": {"staleness_aware": true}})", 2, "async")
        == std::pair{true, false});
  CHECK(at(R"({"optimizer": {"type": "ftrl"}})", 64, "async")
        == std::pair{false, true});
  // Idempotent: a resolved config resolves to itself.
  auto cfg = parse_job_config("{}", "test.json");
  cfg.workers = 40;
  resolve_staleness_aware(cfg);
  cfg.workers = 2;
  resolve_staleness_aware(cfg);
  CHECK(cfg.optimizer.staleness_aware);
}

TEST_CASE("prefetch is on by default between processes for async jobs, off "
          "in one process, and a choice is kept",
          "[core][config]") {
  auto at = [](const char* text, bool between, const char* mode = "async") {
    auto cfg = parse_job_config(text, "test.json");
    cfg.mode = mode;
    auto why = resolve_prefetch(cfg, between);
    CHECK(cfg.prefetch_chosen);
    return std::pair{cfg.prefetch, why};
  };
  auto [on, why_on] = at("{}", true);
  CHECK(on);
  CHECK_THAT(why_on, Catch::Contains("prefetch on (cluster.prefetch auto"));
  CHECK_FALSE(at("{}", false).first);
  CHECK(at("{}", false).second.empty());
  auto [sync, why_sync] = at("{}", true, "sync");
  CHECK_FALSE(sync);
  CHECK_THAT(why_sync, Catch::Contains("not with mode sync"));
  auto [ov, why_ov] = at(R"({"cluster": {"overlap": true}})", true);
  CHECK_FALSE(ov);
  CHECK_THAT(why_ov, Catch::Contains("overlap is on"));
  CHECK_FALSE(at(R"({"cluster": {"layer_pushes": true}})", true).first);
  // Chosen: kept either way, and nothing to say.
  CHECK(at(R"({"cluster": {"prefetch": false}})", true)
        == std::pair{false, std::string{}});
  CHECK(at(R"({"cluster": {"prefetch": true}})", false)
        == std::pair{true, std::string{}});
  CHECK(at(R"({"cluster": {"prefetch": "auto"}})", true).first);
}
