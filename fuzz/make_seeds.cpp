// actorps_fuzz_seeds DIR: writes the binary seed inputs of the fuzz targets
// into DIR/<target>/ (fuzz/corpus in the repository): real messages
// serialised as CAF serialises them, a handshake of the default job, a real
// checkpoint, small IDX files, and request sequences for a parameter server,
// each in its target's input layout (see the target's header comment). The
// text seeds (configs, specs, LIBSVM and CSV lines) are plain files in
// fuzz/corpus, kept by hand.
//
// Built on demand only (`cmake --build build --target actorps_fuzz_seeds`);
// run it again after a change to a message or a file format.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "caf/binary_deserializer.hpp"
#include "caf/binary_serializer.hpp"
#include "caf/make_message.hpp"

#include "actors/messages.hpp"
#include "cluster/net/gate.hpp"
#include "cluster/net/handshake.hpp"
#include "core/checkpoint.hpp"
#include "core/checkpoint_manifest.hpp"
#include "core/idx.hpp"
#include "core/job_config.hpp"
#include "core/placement.hpp"
#include "core/table_file.hpp"
#include "core/wire_format.hpp"
#include "cluster/net/data_frame.hpp"
#include "fuzz/fuzz_system.hpp"

using namespace actorps;

namespace {

namespace fs = std::filesystem;

fs::path out_root;

void put(const std::string& target, const std::string& name,
         const std::string& bytes) {
  auto dir = out_root / target;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// `xs` serialised as BASP serialises message elements.
template <class... Ts>
std::string ser(Ts&... xs) {
  std::vector<char> buf;
  caf::binary_serializer sink{fuzz::fuzz_system(), buf};
  if (auto err = sink(xs...))
    throw std::runtime_error("serialise: "
                             + fuzz::fuzz_system().render(err));
  return {buf.begin(), buf.end()};
}

std::string byte(uint8_t b) {
  return std::string(1, static_cast<char>(b));
}

template <class T>
uint8_t type_index() {
  return static_cast<uint8_t>(caf::type_id<T>::value
                              - caf::id_block::actorps::begin);
}

float_buffer floats(std::initializer_list<float> xs) {
  return float_buffer{float_vector(xs.begin(), xs.end())};
}

// -- sample messages --------------------------------------------------------------

push_request sample_push() {
  push_request p;
  p.read_clock = 1;
  p.id = update_id{1, 0, 7};
  p.gradient.values.assign(15, 0.01f);
  p.tables.push_back(table_rows{1, key_buffer{{3, 9}},
                                floats({1, 2, 3, 4, 5, 6, 7, 8})});
  p.tables.push_back(table_rows{2, key_buffer{{42}}, floats({0.5f, -0.5f})});
  return p;
}

pull_request sample_pull() {
  pull_request p;
  p.worker = 0;
  p.tables.push_back(table_rows{1, key_buffer{{3, 9, 11}}, {}});
  p.tables.push_back(table_rows{2, key_buffer{{42, 99}}, {}});
  return p;
}

ps_snapshot sample_snapshot() {
  ps_snapshot s;
  s.clock = 3;
  s.optimizer_steps = 3;
  s.values.values.assign(15, 0.25f);
  s.slots.push_back(floats({}));
  s.slots[0].values.assign(15, 0.0f);
  table_snapshot t;
  t.shard = 1;
  t.keys.keys = {3, 9};
  t.values = floats({1, 2, 3, 4, 5, 6, 7, 8});
  t.slots.push_back(floats({0, 0, 0, 0, 0, 0, 0, 0}));
  t.steps.keys = {1, 2};
  s.tables.push_back(t);
  return s;
}

handshake sample_handshake() {
  return make_handshake(job_config{}, placement{}, "ps", 0);
}

// -- targets ------------------------------------------------------------------------

void messages() {
  auto put_value = [](const std::string& name, uint8_t index,
                      const std::string& bytes) {
    put("messages", name, byte(index) + bytes);
  };
  auto push = sample_push();
  put_value("push_request", type_index<push_request>(), ser(push));
  auto pull = sample_pull();
  put_value("pull_request", type_index<pull_request>(), ser(pull));
  pull_reply reply;
  reply.clock = 4;
  reply.values = floats({1, 2, 3});
  reply.tables.push_back(table_rows{1, {}, floats({1, 2, 3, 4})});
  put_value("pull_reply", type_index<pull_reply>(), ser(reply));
  create_shard c;
  c.variable = "dense_0/kernel";
  c.row_end = 2;
  c.cols = 2;
  c.values = floats({1, 2, 3, 4});
  put_value("create_shard", type_index<create_shard>(), ser(c));
  auto snap = sample_snapshot();
  put_value("ps_snapshot", type_index<ps_snapshot>(), ser(snap));
  auto rows = push.tables[0];
  put_value("table_rows", type_index<table_rows>(), ser(rows));
  auto hs = sample_handshake();
  put_value("handshake", type_index<handshake>(), ser(hs));
  node_welcome w{hs, nullptr};
  put_value("node_welcome", type_index<node_welcome>(), ser(w));
  closure_request cr{12, "train_step"};
  put_value("closure_request", type_index<closure_request>(), ser(cr));
  step_result sr;
  sr.closure = 12;
  sr.loss = 0.5;
  sr.samples = 64;
  put_value("step_result", type_index<step_result>(), ser(sr));
  ps_stats st;
  st.clock = 9;
  put_value("ps_stats", type_index<ps_stats>(), ser(st));
  replicate_request rr;
  rr.ids.push_back(push.id);
  rr.update = push;
  put_value("replicate_request", type_index<replicate_request>(), ser(rr));
  replica_config rc;
  rc.view = 2;
  put_value("replica_config", type_index<replica_config>(), ser(rc));
  std::vector<group_route> routes(2);
  routes[1].group = 1;
  put_value("group_routes", type_index<std::vector<group_route>>(),
            ser(routes));
  // Whole messages, as BASP carries them: type names, then the elements.
  auto types = static_cast<uint8_t>(caf::id_block::actorps::end
                                    - caf::id_block::actorps::begin);
  auto m1 = caf::make_message(push_atom_v, push);
  put("messages", "message_push", byte(types) + ser(m1));
  auto m2 = caf::make_message(hello_atom_v, hs);
  put("messages", "message_hello", byte(types) + ser(m2));
  auto m3 = caf::make_message(caf::make_error(errc::shape_mismatch,
                                              "push to ps", 0, 15, 14));
  put("messages", "message_error", byte(types) + ser(m3));
}

void handshakes() {
  auto hs = sample_handshake();
  put("handshake", "handshake_same", byte(0) + ser(hs));
  auto other = hs;
  other.protocol = 1;
  other.job.model = "mlp 784-64-10, init seed 42";
  put("handshake", "handshake_other_job", byte(0) + ser(other));
  node_welcome w{hs, nullptr};
  put("handshake", "welcome", byte(1) + ser(w));
}

/// One request of ps_requests: kind, 2-byte length, bytes.
std::string request(uint8_t kind, const std::string& bytes) {
  auto n = bytes.size();
  return byte(kind) + byte(static_cast<uint8_t>(n & 0xff))
         + byte(static_cast<uint8_t>(n >> 8)) + bytes;
}

void ps_requests() {
  auto push = sample_push();
  auto pull = sample_pull();
  uint32_t g = 0;
  put("ps_requests", "async_pull_push",
      byte(0) + request(1, ser(pull)) + request(2, ser(push))
        + request(6, ser(g)));
  auto second = push;
  second.id = update_id{0, 0, 8};
  // sync (mode 1), adam for dense (3 * 3), adagrad for tables.
  put("ps_requests", "sync_round",
      byte(1 + 3 * 3 + 15 * 2) + request(2, ser(push))
        + request(2, ser(second)) + request(1, ser(pull)));
  // ssp (mode 2): pulls, pushes and a held pull.
  auto w1 = pull;
  w1.worker = 1;
  put("ps_requests", "ssp",
      byte(2) + request(2, ser(second)) + request(2, ser(push))
        + request(1, ser(w1)) + request(9, ser(g)));
  // A push in pieces (layer pushes; async, adam): the last run, the same
  // piece again (a duplicate), then the first run with the table rows.
  auto last = push;
  last.piece = true;
  last.offset = 9;
  last.gradient.values.assign(6, 0.02f);
  last.tables.clear();
  auto first = push;
  first.piece = true;
  first.gradient.values.assign(9, 0.01f);
  put("ps_requests", "async_push_pieces",
      byte(3 * 3) + request(2, ser(last)) + request(2, ser(last))
        + request(2, ser(first)) + request(6, ser(g)));
  // A push whose dense gradient is in int8 (one part over the region), and
  // a pull of the values in int8 (async, adam).
  auto q = push;
  q.id = update_id{1, 0, 9};
  encoded_part part;
  part.format = "int8";
  std::vector<float> g15(15, 0.01f);
  g15[4] = -0.3f;
  make_wire_format("int8")->encode(g15.data(), g15.size(), part.tensor,
                                   nullptr);
  q.gradient.values.clear();
  q.parts.push_back(std::move(part));
  auto qp = pull;
  qp.dense = true;
  qp.format = "int8";
  put("ps_requests", "async_int8",
      byte(3 * 3) + request(2, ser(q)) + request(1, ser(qp))
        + request(6, ser(g)));
  auto snap = sample_snapshot();
  put("ps_requests", "restore_save",
      byte(0) + request(8, ser(g, snap)) + request(7, ser(g)));
  create_shard c;
  c.variable = "extra";
  c.row_end = 2;
  c.cols = 2;
  c.values = floats({1, 2, 3, 4});
  replica_config backup;
  backup.primary = false;
  backup.view = 1;
  uint64_t view = 1;
  replicate_request rr;
  rr.view = 1;
  rr.clock = 5;
  rr.ids.push_back(push.id);
  rr.update = push;
  rr.update.gradient.values.assign(15 + 4, 0.01f); // "w" and "extra"
  put("ps_requests", "create_configure_replicate",
      byte(0) + request(0, ser(c)) + request(4, ser(backup))
        + request(3, ser(rr)) + request(5, ser(g, view, snap)));
  // A backup's update with a gradient of 1 float for a region of 15: read
  // past the buffer before replicate() checked it.
  replicate_request bad;
  bad.view = 1;
  bad.clock = 1;
  bad.ids.push_back(update_id{0, 0, 1});
  bad.update.view = 1;
  bad.update.gradient = floats({1});
  put("ps_requests", "crash_replicate_unchecked_gradient",
      byte(0) + request(4, ser(backup)) + request(3, ser(bad)));
  // ... and one naming a table shard the group does not hold
  // (std::out_of_range in the handler: the server died).
  auto unknown = bad;
  unknown.update.gradient.values.assign(15, 0.0f);
  unknown.update.tables.push_back(table_rows{9, key_buffer{{1}},
                                             floats({1, 2})});
  put("ps_requests", "crash_replicate_unknown_shard",
      byte(0) + request(4, ser(backup)) + request(3, ser(unknown)));
  uint64_t round = 1;
  put("ps_requests", "flush", byte(1) + request(2, ser(push))
                                + request(10, ser(g, round)));
}

void gate_preamble() {
  std::string p(16, '\0');
  p.replace(0, 8, std::string("ACTORPS\0", 8));
  for (int i = 0; i < 4; ++i)
    p[8 + i] = static_cast<char>((protocol_version >> (8 * i)) & 0xff);
  put("gate_preamble", "valid_whole", byte(15) + p);
  put("gate_preamble", "valid_bytewise", byte(0) + p);
  auto old = p;
  old[8] = 1;
  put("gate_preamble", "other_version", byte(3) + old);
  put("gate_preamble", "http", byte(15) + "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
}

void idx() {
  auto dir = fs::temp_directory_path() / "actorps-seeds";
  fs::create_directories(dir);
  idx_array labels{{4}, {0, 1, 2, 9}};
  idx_array images{{2, 2, 3}, {0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255}};
  write_idx_gz((dir / "l.gz").string(), labels);
  write_idx_gz((dir / "i.gz").string(), images);
  put("idx", "labels_gz", byte(0) + read_all(dir / "l.gz"));
  put("idx", "images_gz_keep1", byte(1) + read_all(dir / "i.gz"));
  std::string plain{"\0\0\x08\x01\0\0\0\x03", 8};
  plain += "abc";
  put("idx", "labels_plain", byte(0) + plain);
  // Pair mode (bit 7): label file length, labels, images.
  idx_array pair_labels{{2}, {3, 9}};
  write_idx_gz((dir / "pl.gz").string(), pair_labels);
  auto lab = read_all(dir / "pl.gz");
  put("idx", "pair_gz", byte(0x80) + byte(static_cast<uint8_t>(lab.size()))
                          + byte(0) + lab + read_all(dir / "i.gz"));
  fs::remove_all(dir);
}

void checkpoints() {
  auto root = fs::temp_directory_path() / "actorps-seeds-ckpt";
  fs::remove_all(root);
  checkpoint_state st;
  st.global_step = 12;
  st.epoch = 1;
  st.step_in_epoch = 2;
  st.workers = {{1, 64}, {1, 128}};
  st.ps_clocks = {6, 6};
  st.optimizer_steps = {6, 6};
  st.job = {{"model", "mlp 4-2, init seed 42"}, {"cluster", "2 workers, 2 ps"}};
  checkpoint_shard dense;
  dense.variable = "dense_0/kernel";
  dense.row_end = 2;
  dense.cols = 2;
  dense.values = {1, 2, 3, 4};
  dense.slots = {{0.1f, 0.2f, 0.3f, 0.4f}};
  checkpoint_shard table;
  table.variable = "emb";
  table.index = 1;
  table.table = true;
  table.row_begin = 0;
  table.row_end = 0;
  table.cols = 2;
  table.ps = 1;
  table.values = {5, 6, 7, 8};
  table.keys = {9, 3};
  table.steps = {1, 2};
  st.shards = {dense, table};
  auto dir = fs::path(write_checkpoint(root.string(), st, 1));
  auto manifest = read_all(dir / "manifest.json");
  auto s0 = read_all(dir / "shard-0000.bin");
  auto s1 = read_all(dir / "shard-0001.bin");
  put("checkpoint_manifest", "v2_dense_and_table", manifest);
  put("checkpoint_dir", "v2_dense_and_table",
      manifest + "\n#FILE\n" + s0 + "\n#FILE\n" + s1);
  // checkpoint_shard: flags (table, slots << 1), rows, cols, the file.
  put("checkpoint_shard", "dense_2x2_1slot", byte(1 << 1) + byte(2) + byte(2)
                                               + s0);
  put("checkpoint_shard", "table_2x2", byte(1) + byte(2) + byte(2) + s1);
  fs::remove_all(root);
}

/// Table shard files of an export (core/table_file.hpp): flags (bit 0: the
/// harness fixes the CRCs), then the file.
void table_files() {
  auto dir = fs::temp_directory_path() / "actorps-seeds-table";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto one = [&](const char* name, uint64_t dim,
                 std::vector<uint64_t> keys) {
    std::vector<float> values(keys.size() * dim);
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = 0.25f * static_cast<float>(i) - 1.0f;
    auto path = dir / name;
    write_table_file(path.string(), dim, keys, values);
    auto file = read_all(path);
    put("table_file", std::string{name} + "_checked", byte(0) + file);
    put("table_file", std::string{name} + "_crc_fixed", byte(1) + file);
  };
  one("dim4_3rows", 4, {2, 9, 1000000007});
  one("dim1_1row", 1, {42});
  one("dim2_empty", 2, {});
  fs::remove_all(dir);
}

} // namespace

/// Data channel frames (cluster/net/data_frame.hpp), as a peer sends them.
void data_frames() {
  auto& sys = fuzz::fuzz_system();
  auto whole = [](const out_frame& f) {
    std::string s(f.header.begin(), f.header.end());
    s.append(f.meta.begin(), f.meta.end());
    s.append(f.bulk, f.bulk_bytes);
    return s;
  };
  // `f` with its meta cut to, or padded with zeros to, `n` bytes, and its
  // header saying so.
  auto with_meta = [](out_frame f, size_t n) {
    f.meta.resize(n, '\0');
    for (int i = 0; i < 4; ++i)
      f.header[16 + i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return f;
  };
  pull_reply r;
  r.clock = 4;
  r.values = floats({1, 2, 3});
  std::pair<const char*, out_frame> frames[] = {
    {"pull", encode(sys, 1, sample_pull())},
    {"push", encode(sys, 2, sample_push())},
    {"pull_reply", encode(sys, 3, r)},
    {"push_reply", encode_clock(4, 17)},
    {"error", encode_error(sys, 5, caf::make_error(errc::stale_view, "group",
                                                   1))},
  };
  for (auto& [name, f] : frames) {
    put("data_frame", name, whole(f));
    auto n = f.meta.size();
    put("data_frame", std::string{name} + "_meta_short",
        whole(with_meta(f, n - 1)));
    put("data_frame", std::string{name} + "_meta_long",
        whole(with_meta(f, n + 1)));
  }
  // An error cut inside its context, at the longest cut that CAF's
  // deserializer alone reads without complaint (as the error without its
  // context).
  auto& err = frames[4].second;
  for (auto n = err.meta.size() - 1; n > 0; --n) {
    caf::error x;
    caf::binary_deserializer source{sys, err.meta.data(), n};
    if (!source(x) && source.remaining() == 0) {
      put("data_frame", "error_meta_cut_in_context",
          whole(with_meta(err, n)));
      break;
    }
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (fuzz/corpus)\n", argv[0]);
    return 2;
  }
  out_root = argv[1];
  messages();
  handshakes();
  ps_requests();
  gate_preamble();
  idx();
  checkpoints();
  table_files();
  data_frames();
  std::printf("seeds written to %s\n", out_root.c_str());
  return 0;
}
