#include "cluster/spec/hostlist.hpp"

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "cluster/spec/subprocess.hpp"
#include "core/error.hpp"

using namespace actorps;

namespace {

using names = std::vector<std::string>;

struct good_case {
  const char* text;
  names expected;
};

struct bad_case {
  const char* text;
  const char* error; ///< a piece of the message
};

} // namespace

// Every expected list here is what Slurm 22.05's `scontrol show hostnames`
// printed for the same text; test/slurm_test.sh asks scontrol again (the
// hidden case below).
const good_case good_cases[] = {
  {"node7", {"node7"}},
  {"node[01-03,07],gpu5", {"node01", "node02", "node03", "node07", "gpu5"}},
  {"n[8-11]", {"n8", "n9", "n10", "n11"}},
  {"n[08-11]", {"n08", "n09", "n10", "n11"}},
  {"n[9-10]", {"n9", "n10"}},
  {"n[001-10]", {"n001", "n002", "n003", "n004", "n005", "n006", "n007",
                 "n008", "n009", "n010"}},
  {"n[1-010]", {"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"}},
  {"n[0100-0102]", {"n0100", "n0101", "n0102"}},
  {"n[1-1]", {"n1"}},
  {"n[0-3]", {"n0", "n1", "n2", "n3"}},
  {"n[1,1]", {"n1", "n1"}},
  {"a[1-2],a1", {"a1", "a2", "a1"}},
  {"a[1-2]b[3-4]", {"a1b3", "a1b4", "a2b3", "a2b4"}},
  {"rack[1-2]-n[1-2]", {"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}},
  {"n[1-2][3-4]", {"n13", "n14", "n23", "n24"}},
  {"[1-2]", {"1", "2"}},
  {"a,b", {"a", "b"}},
  {"a, b", {"a", "b"}},
  {"a b", {"a", "b"}},
  {"n1-2", {"n1-2"}},
  {"a.b.c", {"a.b.c"}},
  {"localhost", {"localhost"}},
};

TEST_CASE("a Slurm host list expands as scontrol show hostnames does",
          "[hostlist]") {
  for (auto& c : good_cases) {
    INFO(c.text);
    CHECK(expand_hostlist(c.text) == c.expected);
  }
}

// Run by test/slurm_test.sh with a Slurm configuration (SLURM_CONF): the
// parser against Slurm's own, live.
TEST_CASE("expand_hostlist gives what scontrol show hostnames prints",
          "[.scontrol]") {
  for (auto& c : good_cases) {
    INFO(c.text);
    auto out = run_program({"scontrol", "show", "hostnames", c.text},
                           std::chrono::seconds(10));
    REQUIRE(out.started);
    REQUIRE(out.status == 0);
    names printed;
    std::istringstream lines{out.output};
    for (std::string line; std::getline(lines, line);)
      printed.push_back(line);
    CHECK(expand_hostlist(c.text) == printed);
  }
}

TEST_CASE("a malformed Slurm host list is refused, naming the text and the "
          "problem",
          "[hostlist]") {
  const bad_case cases[] = {
    {"", "the list is empty"},
    {"   ", "the list is empty"},
    {"a,,b", "empty entry (at character 3)"},
    {",a", "empty entry (at character 1)"},
    {"a,", "empty entry"},
    {"n[1-2", "'[' without ']' (at character 2)"},
    {"n]", "']' without '[' (at character 2)"},
    {"n[[1]]", "'[' inside brackets"},
    {"n[]", "empty brackets"},
    {"n[1,,2]", "empty range"},
    {"n[3-1]", "range \"3-1\" runs backwards"},
    {"n[10-9]", "runs backwards"},
    {"n[-2]", "a range needs a number"},
    {"n[1-]", "open range \"1-\""},
    {"n[a-b]", "'a' in a range"},
    {"n[ 1-2]", "' ' in a range"},
    {"n[1-2-3]", "'-' in a range"},
    {"n[1-10]x", "text \"x\" after the last ']'"},
    {"n[1-2]-ib,c", "text \"-ib\" after the last ']'"},
    {"gpu-[3-4].cluster.example", "text \".cluster.example\" after"},
    {"n[99999999999999999999]", "has more than 18 digits"},
    {"n[0-999999999]", "expands to more than 65536 names"},
    {"a[0-1023]b[0-1024]", "expands to more than 65536 names"},
    {"n\x01", "control character"},
  };
  for (auto& c : cases) {
    INFO(c.text);
    try {
      expand_hostlist(c.text);
      FAIL("no error for \"" << c.text << "\"");
    } catch (const input_error& e) {
      std::string what = e.what();
      CHECK_THAT(what, Catch::Contains(c.error));
      CHECK_THAT(what, Catch::StartsWith("bad Slurm host list \""));
    }
  }
}

TEST_CASE("a Slurm task list expands each count by its repetition",
          "[hostlist]") {
  using counts = std::vector<uint32_t>;
  CHECK(expand_tasks_per_node("5") == counts{5});
  CHECK(expand_tasks_per_node("2(x3),1") == counts{2, 2, 2, 1});
  CHECK(expand_tasks_per_node("1,4(x2)") == counts{1, 4, 4});
  CHECK(expand_tasks_per_node("3(x1)") == counts{3});
  CHECK(expand_tasks_per_node("2147483648") == counts{2147483648u});
}

TEST_CASE("a malformed Slurm task list is refused, naming the text and the "
          "problem",
          "[hostlist]") {
  const bad_case cases[] = {
    {"", "the list is empty"},
    {"0", "count 0 is out of range"},
    {"2(x0)", "repetition 0 is out of range"},
    {"2,,1", "empty entry"},
    {"2(x3", "expected COUNT(xREPEAT)"},
    {"2(3)", "expected COUNT(xREPEAT)"},
    {"2(x)", "expected COUNT(xREPEAT)"},
    {"(x3)", "count \"\" is not a whole number"},
    {"-1", "count \"-1\" is not a whole number"},
    {" 2", "count \" 2\" is not a whole number"},
    {"99999999999", "is not a whole number"},
    {"4294967296", "out of range"},
    {"1(x65536),1", "expands to more than 65536 entries"},
  };
  for (auto& c : cases) {
    INFO(c.text);
    try {
      expand_tasks_per_node(c.text);
      FAIL("no error for \"" << c.text << "\"");
    } catch (const input_error& e) {
      std::string what = e.what();
      CHECK_THAT(what, Catch::Contains(c.error));
      CHECK_THAT(what, Catch::StartsWith("bad Slurm task list \""));
    }
  }
}
