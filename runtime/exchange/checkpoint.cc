#include "runtime/exchange/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/little_endian.h"

namespace kubetrain::exchange {

// The parameters and states are written as the host's floats: little-endian
// IEEE-754, as the format says.
static_assert(base::kHostIsLittleEndian, "checkpoints hold little-endian floats");
namespace {

namespace fs = std::filesystem;
constexpr char kMagic[8] = {'K', 'T', 'C', 'K', 'P', 'T', '0', '1'};

class CrcWriter {
 public:
  explicit CrcWriter(int fd) : fd_(fd) {}
  bool Write(const void* p, size_t n) {
    crc_ = crc32(crc_, static_cast<const Bytef*>(p), static_cast<uInt>(n));
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd_, c, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      c += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  uint32_t crc() const { return static_cast<uint32_t>(crc_); }

 private:
  int fd_;
  uLong crc_ = crc32(0L, Z_NULL, 0);
};

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(path, ": ", what, ": ", std::strerror(errno)));
}

}  // namespace

std::optional<DataPosition> DataPositionOf(const v1::CheckpointHeader& header) {
  if (!header.has_data_epoch() || !header.has_data_cursor()) return std::nullopt;
  return DataPosition{.epoch = header.data_epoch(), .cursor = header.data_cursor()};
}

void SetDataPosition(const DataPosition& position, v1::CheckpointHeader& header) {
  header.set_data_epoch(position.epoch);
  header.set_data_cursor(position.cursor);
}

std::string ShardCheckpointDir(const std::string& dir, int shard_index, int num_shards) {
  return (fs::path(dir) / absl::StrCat("shard-", shard_index, "-of-", num_shards)).string();
}

absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, const CheckpointView& ckpt,
                                            int keep) {
  const v1::CheckpointHeader& h = ckpt.header;
  const std::string shard_dir = ShardCheckpointDir(dir, h.shard_index(), h.num_shards());
  std::error_code ec;
  fs::create_directories(shard_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(shard_dir, ": ", ec.message()));
  const std::string name = absl::StrFormat("ckpt-%012d.ktc", h.global_step());
  const std::string path = (fs::path(shard_dir) / name).string();
  const std::string tmp = path + ".tmp";

  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("open", tmp);
  CrcWriter w(fd);
  const std::string header = h.SerializeAsString();
  unsigned char header_len[4];
  base::PutLittleEndian(header_len, static_cast<uint32_t>(header.size()));
  bool ok = w.Write(kMagic, sizeof(kMagic)) && w.Write(header_len, 4) &&
            w.Write(header.data(), header.size()) &&
            w.Write(ckpt.params.data(), ckpt.params.size_bytes());
  for (const auto& s : ckpt.states) ok = ok && w.Write(s.data(), s.size_bytes());
  unsigned char crc[4];
  base::PutLittleEndian(crc, w.crc());
  ok = ok && CrcWriter(fd).Write(crc, 4);
  if (!ok) {
    absl::Status s = Errno("write", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Errno("fsync", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename", tmp);
  // Make the rename durable.
  if (int dfd = ::open(shard_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  // Retention: newest `keep` by name (zero-padded steps sort by step).
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(shard_dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.starts_with("ckpt-") && f.ends_with(".ktc")) files.push_back(e.path().string());
  }
  std::sort(files.rbegin(), files.rend());
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < files.size(); ++i) {
    fs::remove(files[i], ec);
  }
  return path;
}

absl::StatusOr<CheckpointData> ReadCheckpoint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto corrupt = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(path, ": ", why));
  };
  if (bytes.size() < sizeof(kMagic) + 8) return corrupt("truncated (shorter than a header)");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return corrupt("not a checkpoint");
  const uint32_t stored_crc = base::GetLittleEndian<uint32_t>(bytes.data() + bytes.size() - 4);
  const uint32_t crc = static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0),
                                                   reinterpret_cast<const Bytef*>(bytes.data()),
                                                   static_cast<uInt>(bytes.size() - 4)));
  const uint32_t header_len = base::GetLittleEndian<uint32_t>(bytes.data() + sizeof(kMagic));
  size_t pos = sizeof(kMagic) + 4;
  if (header_len > bytes.size() - pos - 4) return corrupt("truncated header");
  CheckpointData d;
  d.path = path;
  if (!d.header.ParseFromArray(bytes.data() + pos, static_cast<int>(header_len))) {
    return corrupt("unreadable header");
  }
  pos += header_len;
  if (d.header.has_data_epoch() != d.header.has_data_cursor()) {
    return corrupt(d.header.has_data_epoch() ? "header has data_epoch without data_cursor"
                                             : "header has data_cursor without data_epoch");
  }
  d.data_position = DataPositionOf(d.header);
  if (d.data_position && (d.data_position->epoch < 0 || d.data_position->cursor < 0)) {
    return corrupt(absl::StrCat("negative data position (epoch ", d.data_position->epoch,
                                ", cursor ", d.data_position->cursor, ")"));
  }
  const size_t n = d.header.range().length();
  const size_t want = pos + n * 4 * (1 + static_cast<size_t>(d.header.state_names_size())) + 4;
  if (bytes.size() != want) {
    return corrupt(absl::StrCat("truncated: ", bytes.size(), " bytes, header implies ", want));
  }
  if (crc != stored_crc) return corrupt("checksum mismatch");
  d.params.resize(n);
  std::memcpy(d.params.data(), bytes.data() + pos, n * 4);
  pos += n * 4;
  for (int i = 0; i < d.header.state_names_size(); ++i) {
    d.states.emplace_back(n);
    std::memcpy(d.states.back().data(), bytes.data() + pos, n * 4);
    pos += n * 4;
  }
  return d;
}

absl::StatusOr<CheckpointData> LoadLatestCheckpoint(
    const std::string& dir, int shard_index, int num_shards,
    const std::function<void(const std::string&)>& warn) {
  const std::string shard_dir = ShardCheckpointDir(dir, shard_index, num_shards);
  std::error_code ec;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(shard_dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.starts_with("ckpt-") && f.ends_with(".ktc")) files.push_back(e.path().string());
  }
  std::sort(files.rbegin(), files.rend());
  for (const std::string& f : files) {
    absl::StatusOr<CheckpointData> d = ReadCheckpoint(f);
    if (d.ok()) return d;
    warn(absl::StrCat("skipping corrupt checkpoint: ", d.status().message()));
  }
  return absl::NotFoundError(absl::StrCat("no valid checkpoint in ", shard_dir));
}

}  // namespace kubetrain::exchange
