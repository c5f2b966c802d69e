#include "runtime/data/gz_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kubetrain::data {

absl::StatusOr<GzFile> GzFile::Open(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::not_found) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  if (st.type() == std::filesystem::file_type::directory) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a file"));
  }
  errno = 0;
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int err = errno;
    const std::string reason = err != 0 ? std::strerror(err) : "out of memory";
    if (err == EACCES || err == EPERM) {
      return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open: ", reason));
    }
    return absl::InternalError(absl::StrCat(path, ": cannot open: ", reason));
  }
  gzbuffer(file, 1 << 17);
  return GzFile(path, file);
}

GzFile::GzFile(GzFile&& other) noexcept
    : path_(std::move(other.path_)),
      file_(std::exchange(other.file_, nullptr)),
      bytes_read_(other.bytes_read_) {}

GzFile& GzFile::operator=(GzFile&& other) noexcept {
  if (this != &other) {
    if (file_ != nullptr) gzclose(file_);
    path_ = std::move(other.path_);
    file_ = std::exchange(other.file_, nullptr);
    bytes_read_ = other.bytes_read_;
  }
  return *this;
}

GzFile::~GzFile() {
  if (file_ != nullptr) gzclose(file_);
}

absl::StatusOr<size_t> GzFile::Read(void* buf, size_t n) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": read from a closed file"));
  }
  size_t total = 0;
  auto* out = static_cast<unsigned char*>(buf);
  while (total < n) {
    const size_t want = std::min<size_t>(n - total, size_t{1} << 30);
    const int got = gzread(file_, out + total, static_cast<unsigned>(want));
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(file_, &errnum);
      if (errnum == Z_ERRNO) {
        return absl::DataLossError(absl::StrCat(path_, ": read error: ", std::strerror(errno)));
      }
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": corrupt gzip data: ", msg != nullptr ? msg : "unknown error"));
    }
    total += static_cast<size_t>(got);
    if (static_cast<size_t>(got) < want) break;  // End of file.
  }
  bytes_read_ += static_cast<int64_t>(total);
  if (total < n) {
    // zlib reports a gzip stream cut short as Z_BUF_ERROR after returning the
    // partial data, instead of failing the read.
    int errnum = 0;
    const char* msg = gzerror(file_, &errnum);
    if (errnum == Z_BUF_ERROR) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": truncated gzip stream (",
                       msg != nullptr && *msg != '\0' ? msg : "unexpected end of file", ") after ",
                       bytes_read_, " decompressed bytes"));
    }
    if (errnum != Z_OK) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": corrupt gzip data: ", msg != nullptr ? msg : "unknown error"));
    }
  }
  return total;
}

}  // namespace kubetrain::data
