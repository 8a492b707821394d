#include "core/registry.hpp"

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

using namespace actorps;

namespace {

/// A registry of ints with two built-in entries, as the library's
/// registries start.
struct two_built_in {
  struct line {
    const char* name;
    int value;
  };
  static constexpr line table[] = {{"sgd", 1}, {"adam", 2}};

  registry<int> r{"register_number", "number", table,
                  [](const line& l) { return l.value; }};
};

} // namespace

TEST_CASE("a registry finds what was added and nothing for an unknown name",
          "[core][registry]") {
  two_built_in x;
  x.r.add("rmsprop", 3);
  CHECK(x.r.find("sgd") == 1);
  CHECK(x.r.find("adam") == 2);
  CHECK(x.r.find("rmsprop") == 3);
  CHECK(x.r.find("lamb") == std::nullopt);
  CHECK(x.r.find("") == std::nullopt);
  CHECK(x.r.find("SGD") == std::nullopt); // byte for byte
}

TEST_CASE("a registry refuses a duplicate or empty name with an error naming "
          "it, and stays unchanged",
          "[core][registry]") {
  two_built_in x;
  x.r.add("rmsprop", 3);
  CHECK_THROWS_WITH(x.r.add("rmsprop", 4),
                    "register_number(\"rmsprop\"): registered before");
  CHECK_THROWS_WITH(x.r.add("adam", 4),
                    "register_number(\"adam\"): a built-in number has that "
                    "name");
  CHECK_THROWS_WITH(x.r.add("", 4), "register_number: empty name");
  CHECK_THROWS_AS(x.r.add("rmsprop", 4), std::invalid_argument);
  CHECK(x.r.find("rmsprop") == 3);
  CHECK(x.r.find("adam") == 2);
  CHECK(x.r.names() == std::vector<std::string>{"adam", "rmsprop", "sgd"});
  // A table that names an entry twice is refused when the registry is built.
  struct line {
    const char* name;
  };
  const line twice[] = {{"a"}, {"b"}, {"a"}};
  auto build = [&] {
    registry<int> r{"register_letter", "letter", twice,
                    [](const line&) { return 0; }};
  };
  CHECK_THROWS_WITH(build(), "register_letter(\"a\"): a built-in letter has "
                             "that name");
}

TEST_CASE("a registry lists its names sorted, whatever the order of "
          "registration",
          "[core][registry]") {
  registry<int> r{"register_number", "number"};
  CHECK(r.names().empty());
  CHECK(r.known().empty());
  for (auto name : {"sgd", "momentum", "adagrad", "Zeta", "adam", "ftrl"})
    r.add(name, 0);
  CHECK(r.names()
        == std::vector<std::string>{"Zeta", "adagrad", "adam", "ftrl",
                                    "momentum", "sgd"});
  CHECK(r.known() == "Zeta, adagrad, adam, ftrl, momentum, sgd");
}

TEST_CASE("a registry removes what was added at run time, never a built-in "
          "entry, and hands the removed entry back",
          "[core][registry]") {
  two_built_in x;
  x.r.add("rmsprop", 3);
  CHECK(x.r.remove("rmsprop") == 3);
  CHECK(x.r.find("rmsprop") == std::nullopt);
  CHECK(x.r.remove("rmsprop") == std::nullopt); // gone already
  CHECK(x.r.remove("sgd") == std::nullopt);     // built in
  CHECK(x.r.remove("lamb") == std::nullopt);    // never there
  CHECK(x.r.find("sgd") == 1);
  CHECK(x.r.names() == std::vector<std::string>{"adam", "sgd"});
  // The name is free again, and a new entry takes it.
  x.r.add("rmsprop", 5);
  CHECK(x.r.find("rmsprop") == 5);
}

TEST_CASE("two threads registering at once each keep every entry, and one "
          "name is taken once",
          "[core][registry]") {
  constexpr int per_thread = 20000;
  // The names are made first, so that the threads do nothing but register.
  std::vector<std::string> own[2];
  std::vector<std::string> shared;
  for (int i = 0; i < per_thread; ++i) {
    own[0].push_back("t0_" + std::to_string(i));
    own[1].push_back("t1_" + std::to_string(i));
    shared.push_back("shared_" + std::to_string(i));
  }
  // Several rounds: on a busy machine one round's threads may not overlap.
  for (int round = 0; round < 10; ++round) {
    INFO("round " << round);
    registry<int> r{"register_number", "number"};
    std::atomic<int> refused{0};
    std::atomic<int> ready{0};
    auto work = [&](int id) {
      // Both start together, so that their registrations overlap.
      ++ready;
      while (ready < 2)
        std::this_thread::yield();
      for (int i = 0; i < per_thread; ++i) {
        // Its own name, and the one name both threads want each round.
        r.add(own[id][i], id);
        try {
          r.add(shared[i], id);
        } catch (const std::invalid_argument&) {
          ++refused;
        }
      }
    };
    std::thread a{work, 0};
    std::thread b{work, 1};
    a.join();
    b.join();
    // Each shared name went to exactly one thread; no own name got lost.
    REQUIRE(refused == per_thread);
    REQUIRE(r.names().size() == 3 * per_thread);
    for (int i = 0; i < per_thread; i += 997) {
      INFO(i);
      REQUIRE(r.find(own[0][i]) == 0);
      REQUIRE(r.find(own[1][i]) == 1);
      REQUIRE(r.find(shared[i]).has_value());
    }
  }
}
