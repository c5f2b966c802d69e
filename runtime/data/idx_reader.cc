#include "runtime/data/idx_reader.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/data/gz_file.h"

namespace kubetrain::data {
namespace {

constexpr uint8_t kTypeUnsignedByte = 0x08;
// Refuse headers that declare more than this many elements (1 TiB): they are
// corrupt, and the product of the dimensions could overflow.
constexpr int64_t kMaxElements = int64_t{1} << 40;

const char* TypeName(uint8_t type) {
  switch (type) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return nullptr;
  }
}

// "60000 images of 28x28", "60000 labels", "3 items of 4x5x6".
std::string DescribeDims(const std::vector<int64_t>& dims) {
  const char* noun = dims.size() == 1 ? "labels" : dims.size() == 3 ? "images" : "items";
  std::string out = absl::StrCat(dims[0], " ", noun);
  if (dims.size() > 1) {
    absl::StrAppend(&out, " of ",
                    absl::StrJoin(std::vector<int64_t>(dims.begin() + 1, dims.end()), "x"));
  }
  return out;
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdx(const std::string& path) {
  absl::StatusOr<GzFile> opened = GzFile::Open(path);
  if (!opened.ok()) return opened.status();
  GzFile& file = *opened;

  std::array<uint8_t, 4> magic{};
  absl::StatusOr<size_t> got = file.Read(magic.data(), magic.size());
  if (!got.ok()) return got.status();
  if (*got == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
  if (*got < magic.size()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated: file has ", *got,
                                                   " bytes, shorter than the 4-byte magic"));
  }
  const uint32_t magic_value = (uint32_t{magic[0]} << 24) | (uint32_t{magic[1]} << 16) |
                               (uint32_t{magic[2]} << 8) | uint32_t{magic[3]};
  const uint8_t type = magic[2];
  const int ndims = magic[3];
  if (magic[0] != 0 || magic[1] != 0 || TypeName(type) == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: not an IDX file (magic 0x%08x; expected 0x0000TTNN with element type TT in 08..0e)",
        path, magic_value));
  }
  if (type != kTypeUnsignedByte) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: unsupported IDX element type 0x%02x (%s); only unsigned byte (0x08) is supported",
        path, type, TypeName(type)));
  }
  if (ndims == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: IDX header declares 0 dimensions (magic 0x%08x)", path, magic_value));
  }

  const size_t header_bytes = 4 + 4 * static_cast<size_t>(ndims);
  std::vector<uint8_t> dim_bytes(4 * static_cast<size_t>(ndims));
  got = file.Read(dim_bytes.data(), dim_bytes.size());
  if (!got.ok()) return got.status();
  if (*got < dim_bytes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": truncated: header declares ", ndims, " dimensions (", header_bytes,
                     " header bytes), file has ", 4 + *got, " bytes"));
  }

  IdxArray out;
  out.dims.reserve(ndims);
  int64_t elements = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint8_t* b = &dim_bytes[4 * static_cast<size_t>(d)];
    const int64_t dim =
        (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | int64_t{b[3]};
    out.dims.push_back(dim);
    if (dim != 0 && elements > kMaxElements / dim) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": header declares an implausibly large array (",
                       absl::StrJoin(out.dims, "x"), "...); the file is probably corrupt"));
    }
    elements *= dim;
  }
  if (elements > kMaxElements) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": header declares an implausibly large array (", absl::StrJoin(out.dims, "x"), ")"));
  }

  // Read in chunks so a lying header cannot make us allocate more than the
  // file actually holds.
  constexpr size_t kChunk = size_t{1} << 22;
  const auto expected = static_cast<size_t>(elements);
  out.data.reserve(std::min(expected, kChunk * 16));
  while (out.data.size() < expected) {
    const size_t offset = out.data.size();
    const size_t want = std::min(kChunk, expected - offset);
    out.data.resize(offset + want);
    got = file.Read(out.data.data() + offset, want);
    if (!got.ok()) return got.status();
    if (*got < want) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": truncated: header says ", DescribeDims(out.dims), " (", expected,
                       " bytes of data), file has ", offset + *got, " bytes after the ",
                       header_bytes, "-byte header"));
    }
  }

  // Anything after the declared data means the header and the data disagree.
  std::vector<uint8_t> rest(1 << 16);
  int64_t trailing = 0;
  while (true) {
    got = file.Read(rest.data(), rest.size());
    if (!got.ok()) return got.status();
    trailing += static_cast<int64_t>(*got);
    if (*got < rest.size()) break;
  }
  if (trailing > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", trailing, " unexpected trailing bytes after the ", expected,
                     " bytes of data the header declares (", DescribeDims(out.dims), ")"));
  }
  return out;
}

absl::StatusOr<Dataset> LoadIdxDataset(const std::string& images_path,
                                       const std::string& labels_path) {
  absl::StatusOr<IdxArray> images = ReadIdx(images_path);
  if (!images.ok()) return images.status();
  if (images->dims.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_path, ": images must be 3-D (count x rows x cols), file is ",
                     images->dims.size(), "-D (", absl::StrJoin(images->dims, "x"), ")"));
  }
  absl::StatusOr<IdxArray> labels = ReadIdx(labels_path);
  if (!labels.ok()) return labels.status();
  if (labels->dims.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": labels must be 1-D (count), file is ", labels->dims.size(),
                     "-D (", absl::StrJoin(labels->dims, "x"), ")"));
  }
  const int64_t count = images->dims[0];
  const int64_t rows = images->dims[1];
  const int64_t cols = images->dims[2];
  if (count != labels->dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, ", ", labels_path, ": ", count,
                                                   " images but ", labels->dims[0], " labels"));
  }
  if (count == 0) {
    return absl::InvalidArgumentError(absl::StrCat(images_path, ": contains 0 images"));
  }
  if (rows == 0 || cols == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_path, ": images have an empty shape ", rows, "x", cols));
  }

  Dataset ds;
  ds.sample_shape = {rows, cols, 1};
  ds.features.resize(images->data.size());
  std::array<float, 256> scaled{};
  for (int v = 0; v < 256; ++v) scaled[v] = static_cast<float>(v) / 255.0f;
  std::transform(images->data.begin(), images->data.end(), ds.features.begin(),
                 [&scaled](uint8_t v) { return scaled[v]; });
  // Free the bytes before building the labels; the float copy is 4x larger.
  images->data = {};
  ds.labels.assign(labels->data.begin(), labels->data.end());
  ds.num_classes = *std::max_element(ds.labels.begin(), ds.labels.end()) + 1;
  return ds;
}

}  // namespace kubetrain::data
