// The job's secret (cluster/net/job_secret.hpp) without sockets: a secret
// file is read only when it is its owner's alone and long enough, with the
// file and the problem named otherwise; proofs made with the same secret
// check, with another one, for the other side or for another transcript
// they do not; a gate's verdict admits a right proof and refuses a wrong
// one with its reason; the dialer accepts only a right gate proof. The
// exchange between a real gate and dialer is in gate_test.cpp.

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include "cluster/net/job_secret.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"

using namespace actorps;
namespace fs = std::filesystem;

namespace {

/// A scratch folder, removed at the end.
struct scratch {
  fs::path dir;
  scratch() {
    std::string templ = (fs::temp_directory_path() / "secret-test-XXXXXX");
    REQUIRE(mkdtemp(templ.data()) != nullptr);
    dir = templ;
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  /// Writes `bytes` to NAME with `mode`; returns its path.
  std::string file(const std::string& name, const std::string& bytes,
                   mode_t mode = 0600) const {
    auto path = (dir / name).string();
    std::ofstream{path, std::ios::binary} << bytes;
    REQUIRE(chmod(path.c_str(), mode) == 0);
    return path;
  }
};

const std::string key_a(32, 'a');
const std::string key_b = std::string(31, 'a') + 'b';

secret_transcript some_transcript() {
  secret_transcript t;
  for (size_t i = 0; i < 16; ++i) {
    t.dialer_preamble[i] = static_cast<char>(i);
    t.gate_preamble[i] = static_cast<char>(100 + i);
  }
  t.gate_nonce = fresh_nonce();
  return t;
}

/// What the load of `path` throws ("" if it does not).
std::string load_error(const std::string& path) {
  try {
    job_secret::load(path);
  } catch (const input_error& e) {
    return e.what();
  }
  return {};
}

} // namespace

// -- the file -----------------------------------------------------------------------

TEST_CASE("a secret file of 32 bytes or more that only its owner may read "
          "loads",
          "[secret]") {
  scratch s;
  auto ok = s.file("ok", key_a);
  auto secret = job_secret::load(ok);
  REQUIRE(secret != nullptr);
  CHECK(secret->origin() == ok);
  CHECK(load_error(s.file("read-only", key_a + "\n", 0400)).empty());
}

TEST_CASE("a secret file that is too short, too open, too long, missing or "
          "not a file is refused naming the file and the problem",
          "[secret]") {
  scratch s;
  auto shorter = s.file("short", std::string(31, 'x'));
  CHECK_THAT(load_error(shorter), Catch::Contains(shorter)
                                    && Catch::Contains("31 bytes, fewer "
                                                       "than 32"));
  auto open = s.file("open", key_a, 0644);
  CHECK_THAT(load_error(open),
             Catch::Contains(open)
               && Catch::Contains("group or others (mode 0644)")
               && Catch::Contains("chmod 600"));
  CHECK_THAT(load_error(s.file("group", key_a, 0640)),
             Catch::Contains("mode 0640"));
  CHECK_THAT(load_error(s.file("long", std::string(5000, 'x'))),
             Catch::Contains("more than 4096"));
  CHECK_THAT(load_error((s.dir / "nope").string()),
             Catch::Contains("nope") && Catch::Contains("No such file"));
  CHECK_THAT(load_error(s.dir.string()), Catch::Contains("not a regular file"));
  CHECK_THROWS_AS(job_secret::of_bytes("short", "test"), input_error);
}

TEST_CASE("write_new makes 32 random bytes of mode 0600 and never overwrites",
          "[secret]") {
  scratch s;
  auto path = (s.dir / "secret").string();
  auto old_mask = umask(0); // the mode must not depend on the umask
  job_secret::write_new(path);
  umask(old_mask);
  struct stat sb {};
  REQUIRE(stat(path.c_str(), &sb) == 0);
  CHECK((sb.st_mode & 0777) == 0600);
  CHECK(sb.st_size == 32);
  CHECK(job_secret::load(path) != nullptr);
  CHECK_THROWS_AS(job_secret::write_new(path), runtime_failure);
  auto other = (s.dir / "other").string();
  job_secret::write_new(other);
  std::ifstream a{path, std::ios::binary};
  std::ifstream b{other, std::ios::binary};
  std::string x((std::istreambuf_iterator<char>(a)), {});
  std::string y((std::istreambuf_iterator<char>(b)), {});
  CHECK(x != y);
}

TEST_CASE("the secret file is --secret-file, else DIR/secret of --tls DIR "
          "if it exists, else none",
          "[secret]") {
  scratch s;
  tls_settings tls;
  CHECK_FALSE(secret_file_of("", tls));
  CHECK(secret_file_of("mine", tls) == std::optional<std::string>{"mine"});
  tls.dir = s.dir.string();
  CHECK_FALSE(secret_file_of("", tls)); // no DIR/secret
  s.file("secret", key_a);
  CHECK(secret_file_of("", tls) == (s.dir / "secret").string());
  CHECK(secret_file_of("mine", tls) == std::optional<std::string>{"mine"});
  tls_settings off;
  off.off = true;
  CHECK_FALSE(secret_file_of("", off));
}

// -- proofs ---------------------------------------------------------------------------

TEST_CASE("a proof checks under the same secret, side and transcript only",
          "[secret]") {
  auto a = job_secret::of_bytes(key_a, "a");
  auto a2 = job_secret::of_bytes(key_a, "a again");
  auto b = job_secret::of_bytes(key_b, "b");
  auto t = some_transcript();
  t.dialer_nonce = fresh_nonce();
  auto proof = a->prove(secret_side::dialer, t);
  CHECK(a2->verify(secret_side::dialer, t, proof.data()));
  CHECK_FALSE(b->verify(secret_side::dialer, t, proof.data()));
  // A dialer's proof is not a gate's.
  CHECK_FALSE(a2->verify(secret_side::gate, t, proof.data()));
  CHECK(a->prove(secret_side::gate, t) != proof);
  // Every part of the transcript counts.
  for (auto change : {+[](secret_transcript& x) { x.dialer_preamble[13] ^= 1; },
                      +[](secret_transcript& x) { x.gate_preamble[14] ^= 1; },
                      +[](secret_transcript& x) { x.gate_nonce[31] ^= 1; },
                      +[](secret_transcript& x) { x.dialer_nonce[0] ^= 1; }}) {
    auto other = t;
    change(other);
    CHECK_FALSE(a2->verify(secret_side::dialer, other, proof.data()));
  }
}

TEST_CASE("the exchange admits the right secret and refuses a wrong, missing "
          "or extra one with a reason",
          "[secret]") {
  auto a = job_secret::of_bytes(key_a, "a");
  auto b = job_secret::of_bytes(key_b, "b");
  SECTION("right: both proofs check") {
    auto dialer_side = some_transcript();
    auto answer = dialer_answer(*a, dialer_side);
    REQUIRE(answer.size() == secret_nonce_size + secret_proof_size);
    auto gate_side = dialer_side;
    gate_side.dialer_nonce = {};
    std::string why = "(unset)";
    auto verdict = gate_verdict(*a, gate_side, answer.data(), "gate: ", why);
    CHECK(why.empty());
    CHECK(gate_side.dialer_nonce == dialer_side.dialer_nonce);
    REQUIRE(verdict.size() == secret_verdict_size);
    CHECK(verdict_missing(verdict.data(), 0) == 1);
    CHECK(verdict_missing(verdict.data(), 1) == secret_proof_size);
    CHECK(verdict_missing(verdict.data(), verdict.size()) == 0);
    CHECK(check_verdict(*a, dialer_side, verdict.data(), verdict.size())
          == "");
    // A gate holding another secret cannot pass as this job's.
    CHECK_THAT(check_verdict(*b, dialer_side, verdict.data(), verdict.size()),
               Catch::Contains("job secret wrong or missing")
                 && Catch::Contains("not a node of this job"));
  }
  SECTION("wrong: the gate refuses with its reason, which the dialer reads") {
    auto t = some_transcript();
    auto answer = dialer_answer(*b, t);
    std::string why;
    auto verdict = gate_verdict(*a, t, answer.data(), "ps 0 refuses: ", why);
    CHECK(why == wrong_dialer_proof());
    CHECK_THAT(why, Catch::StartsWith("job secret wrong or missing"));
    REQUIRE(verdict.size() > 3);
    CHECK(verdict[0] == 1);
    CHECK(verdict_missing(verdict.data(), 3) == verdict.size() - 3);
    CHECK(check_verdict(*b, t, verdict.data(), verdict.size())
          == "ps 0 refuses: " + wrong_dialer_proof());
  }
  SECTION("missing or extra: refused at the preamble, each with its reason") {
    CHECK(secret_mismatch(true, true).empty());
    CHECK(secret_mismatch(false, false).empty());
    CHECK_THAT(secret_mismatch(true, false),
               Catch::StartsWith("job secret wrong or missing")
                 && Catch::Contains("the dialer has none"));
    CHECK_THAT(secret_mismatch(false, true),
               Catch::StartsWith("job secret wrong or missing")
                 && Catch::Contains("this node has none"));
  }
  SECTION("garbage for a verdict is refused, not trusted") {
    auto t = some_transcript();
    std::string junk(secret_verdict_size, '\x07');
    CHECK_THAT(check_verdict(*a, t, junk.data(), junk.size()),
               Catch::Contains("malformed verdict"));
    std::string long_refusal = "\x01\xff\xff";
    CHECK(verdict_missing(long_refusal.data(), 3) == 512); // capped
  }
}
