#pragma once

// A fresh directory for one test, removed with its contents at scope exit.

#include <chrono>
#include <filesystem>
#include <string>
#include <system_error>

#include <unistd.h>

namespace actorps::test {

class temp_dir {
public:
  /// @param prefix names the test in the directory's name.
  explicit temp_dir(const std::string& prefix) {
    static int counter = 0;
    auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = std::filesystem::temp_directory_path()
            / (prefix + "_" + std::to_string(::getpid()) + "_"
               + std::to_string(stamp) + "_" + std::to_string(++counter));
    std::filesystem::create_directories(path_);
  }

  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  /// The path of `name` inside the directory.
  std::string file(const std::string& name) const {
    return (path_ / name).string();
  }

  const std::filesystem::path& path() const {
    return path_;
  }

private:
  std::filesystem::path path_;
};

} // namespace actorps::test
