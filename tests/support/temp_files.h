// Test helpers: a fresh temporary directory per test and writers for plain
// and gzip files. Not thread-safe.
#ifndef KUBETRAIN_TESTS_SUPPORT_TEMP_FILES_H_
#define KUBETRAIN_TESTS_SUPPORT_TEMP_FILES_H_

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace kubetrain::data::testing_util {

// A directory under testing::TempDir(), removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::path(::testing::TempDir()) / "kubetrain_data_XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << tmpl;
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(std::string_view name) const {
    return (std::filesystem::path(path_) / name).string();
  }

 private:
  std::string path_;
};

inline void WritePlain(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline void WriteGz(const std::string& path, std::string_view bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << "cannot open " << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

inline std::string ReadPlain(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::string AsBytes(const std::vector<uint8_t>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size());
}

}  // namespace kubetrain::data::testing_util

#endif  // KUBETRAIN_TESTS_SUPPORT_TEMP_FILES_H_
