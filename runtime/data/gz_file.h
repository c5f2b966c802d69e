// GzFile: a read-only file opened through zlib, so gzip-compressed and plain
// files read the same way. Errors come back as absl::Status values naming the
// file. Move-only; not thread-safe (one reader at a time).
#ifndef KUBETRAIN_RUNTIME_DATA_GZ_FILE_H_
#define KUBETRAIN_RUNTIME_DATA_GZ_FILE_H_

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace kubetrain::data {

class GzFile {
 public:
  // Opens `path` for reading. NotFound "<path>: no such file" when it does not
  // exist; InvalidArgument for a directory; PermissionDenied / Internal when
  // the OS refuses.
  static absl::StatusOr<GzFile> Open(const std::string& path);

  GzFile(GzFile&& other) noexcept;
  GzFile& operator=(GzFile&& other) noexcept;
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  ~GzFile();

  // Reads up to `n` bytes into `buf`. Returns fewer than `n` only at end of
  // file (0 once exhausted). A corrupt or truncated gzip stream is an
  // InvalidArgument error naming the file.
  absl::StatusOr<size_t> Read(void* buf, size_t n);

  // Decompressed bytes returned by Read so far.
  int64_t bytes_read() const { return bytes_read_; }
  const std::string& path() const { return path_; }

 private:
  GzFile(std::string path, gzFile file) : path_(std::move(path)), file_(file) {}

  std::string path_;
  gzFile file_ = nullptr;
  int64_t bytes_read_ = 0;
};

}  // namespace kubetrain::data

#endif  // KUBETRAIN_RUNTIME_DATA_GZ_FILE_H_
