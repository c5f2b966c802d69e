#include "runtime/exchange/ps/grpc_frame.h"

#include <grpc/slice.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/crc32c.h"
#include "base/half_float.h"
#include "runtime/exchange/ps/wire_values.h"

namespace kubetrain::ps {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5;

constexpr uint32_t Tag(uint32_t field, uint32_t wire_type) { return field << 3 | wire_type; }

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

uint8_t* PutVarint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// A varint field, left out when zero (proto3).
size_t VarintFieldSize(uint64_t v) { return v == 0 ? 0 : 1 + VarintSize(v); }
uint8_t* PutVarintField(uint8_t* p, uint32_t field, uint64_t v) {
  if (v == 0) return p;
  *p++ = static_cast<uint8_t>(Tag(field, kVarint));
  return PutVarint(p, v);
}

// Copies and checksums in blocks that stay in cache, so the checksum (and
// the NaN/Inf count) read what the copy just touched.
constexpr size_t kBlockBytes = 32 * 1024;

// The TensorChunk body for `values`: its size, and a writer that fills it.
struct ChunkLayout {
  uint64_t offset, length;
  v1::WireDType dtype;
  size_t data_bytes;
  size_t range_bytes;
  size_t body_bytes;

  ChunkLayout(std::span<const float> values, int64_t off, v1::WireDType t)
      : offset(static_cast<uint64_t>(off)),
        length(values.size()),
        dtype(t),
        data_bytes(values.size() * WireBytesPerElement(t)) {
    range_bytes = VarintFieldSize(offset) + VarintFieldSize(length);
    body_bytes = 1 + VarintSize(range_bytes) + range_bytes + VarintFieldSize(dtype) +
                 (data_bytes == 0 ? 0 : 1 + VarintSize(data_bytes) + data_bytes) + 5;
  }
  size_t FieldBytes(uint32_t field_number) const {
    (void)field_number;  // single-byte tags: field numbers below 16
    return 1 + VarintSize(body_bytes) + body_bytes;
  }

  // Writes the chunk field (tag, length, body) at p; returns the end.
  uint8_t* Write(uint8_t* p, uint32_t field, std::span<const float> values) const {
    *p++ = static_cast<uint8_t>(Tag(field, kLen));
    p = PutVarint(p, body_bytes);
    *p++ = static_cast<uint8_t>(Tag(1, kLen));  // range, always present
    p = PutVarint(p, range_bytes);
    p = PutVarintField(p, 1, offset);
    p = PutVarintField(p, 2, length);
    p = PutVarintField(p, 2, static_cast<uint64_t>(dtype));
    uint32_t crc = 0;
    if (data_bytes != 0) {
      *p++ = static_cast<uint8_t>(Tag(3, kLen));
      p = PutVarint(p, data_bytes);
      if (dtype == v1::WIRE_DTYPE_F16) {
        uint16_t half[kBlockBytes / 2];
        for (size_t i = 0; i < values.size(); i += kBlockBytes / 2) {
          const size_t n = std::min(kBlockBytes / 2, values.size() - i);
          base::FloatsToHalves(values.data() + i, n, half);
          std::memcpy(p, half, n * 2);
          crc = base::Crc32cExtend(crc, p, n * 2);
          p += n * 2;
        }
      } else {
        const auto* src = reinterpret_cast<const uint8_t*>(values.data());
        for (size_t off = 0; off < data_bytes; off += kBlockBytes) {
          const size_t n = std::min(kBlockBytes, data_bytes - off);
          std::memcpy(p, src + off, n);
          crc = base::Crc32cExtend(crc, p, n);
          p += n;
        }
      }
    }
    *p++ = static_cast<uint8_t>(Tag(4, kFixed32));  // crc32c, always written
    for (int i = 0; i < 4; ++i) *p++ = static_cast<uint8_t>(crc >> (8 * i));
    return p;
  }
};

// One slice of `size` bytes, filled by `fill`, from `pool` when there is
// one.
template <typename Fill>
grpc::ByteBuffer OneSlice(size_t size, FramePool* pool, Fill fill) {
  FramePool local(0);
  grpc::Slice slice = (pool != nullptr ? pool : &local)->Make(size, fill);
  return grpc::ByteBuffer(&slice, 1);
}

// Reads protobuf wire data across the slices of a received ByteBuffer.
class Cursor {
 public:
  explicit Cursor(const std::vector<grpc::Slice>& slices) : slices_(slices) { SkipEmpty(); }

  size_t consumed() const { return consumed_; }
  size_t slice() const { return slice_; }
  size_t pos() const { return pos_; }

  bool ReadByte(uint8_t* b) {
    if (slice_ >= slices_.size()) return false;
    *b = slices_[slice_].begin()[pos_];
    Advance(1);
    return true;
  }
  bool ReadVarint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!ReadByte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  bool Skip(size_t n) {
    while (n > 0) {
      if (slice_ >= slices_.size()) return false;
      const size_t k = std::min(n, slices_[slice_].size() - pos_);
      Advance(k);
      n -= k;
    }
    return true;
  }
  bool ReadString(size_t n, std::string* out) {
    out->clear();
    while (n > 0) {
      if (slice_ >= slices_.size()) return false;
      const size_t k = std::min(n, slices_[slice_].size() - pos_);
      out->append(reinterpret_cast<const char*>(slices_[slice_].begin() + pos_), k);
      Advance(k);
      n -= k;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    pos_ += n;
    consumed_ += n;
    SkipEmpty();
  }
  void SkipEmpty() {
    while (slice_ < slices_.size() && pos_ >= slices_[slice_].size()) {
      ++slice_;
      pos_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t slice_ = 0, pos_ = 0, consumed_ = 0;
};

absl::Status Malformed(const char* kind, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed ", kind, " frame: ", what));
}

// Skips a field of `wire_type` whose tag was just read.
bool SkipField(Cursor& c, uint32_t wire_type) {
  uint64_t v;
  switch (wire_type) {
    case kVarint:
      return c.ReadVarint(&v);
    case kFixed64:
      return c.Skip(8);
    case kLen:
      return c.ReadVarint(&v) && c.Skip(v);
    case kFixed32:
      return c.Skip(4);
    default:
      return false;  // groups (3, 4) and invalid types
  }
}

// Pooled buffers: a header, then the data (64-byte aligned).
constexpr size_t kPooledBytes = static_cast<size_t>(kChunkElements) * 4 + 256;
constexpr size_t kHeaderBytes = 64;

struct BufferHeader {
  std::shared_ptr<FramePool::State> state;  // set while lent out
};
static_assert(sizeof(BufferHeader) <= kHeaderBytes);

}  // namespace

struct FramePool::State {
  explicit State(size_t max) : max_free(max) {}
  // Last owner: no lock left to take.
  ~State() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (void* b : free) std::free(b);
  }
  absl::Mutex mu;
  std::vector<void*> free ABSL_GUARDED_BY(mu);
  const size_t max_free;
};

namespace {

// grpc::Slice's destroy callback: back to the pool, or freed.
void ReturnBuffer(void* base) {
  auto* h = static_cast<BufferHeader*>(base);
  std::shared_ptr<FramePool::State> st = std::move(h->state);
  h->~BufferHeader();
  {
    absl::MutexLock lock(&st->mu);
    if (st->free.size() < st->max_free) {
      st->free.push_back(base);
      return;
    }
  }
  std::free(base);
}

}  // namespace

FramePool::FramePool(size_t max_free) : state_(std::make_shared<State>(max_free)) {}

FramePool::~FramePool() = default;

size_t FramePool::idle_buffers() const {
  absl::MutexLock lock(&state_->mu);
  return state_->free.size();
}

FramePool::Lease FramePool::Take(size_t size) {
  Lease l;
  if (size > kPooledBytes || state_->max_free == 0) {
    l.plain = grpc_slice_malloc(size);
    l.data = GRPC_SLICE_START_PTR(l.plain);
    return l;
  }
  {
    absl::MutexLock lock(&state_->mu);
    if (!state_->free.empty()) {
      l.base = state_->free.back();
      state_->free.pop_back();
    }
  }
  if (l.base == nullptr) l.base = std::aligned_alloc(64, kHeaderBytes + kPooledBytes);
  new (l.base) BufferHeader{state_};
  l.data = static_cast<uint8_t*>(l.base) + kHeaderBytes;
  return l;
}

grpc::Slice FramePool::Wrap(Lease& l, size_t size) {
  if (l.base == nullptr) return grpc::Slice(l.plain, grpc::Slice::STEAL_REF);
  return grpc::Slice(l.data, size, &ReturnBuffer, l.base);
}

grpc::ByteBuffer EncodePushFrame(const v1::PushHeader* header, std::span<const float> values,
                                 int64_t offset, v1::WireDType dtype, FramePool* pool,
                                 const v1::PullRequest* pull) {
  const ChunkLayout chunk(values, offset, dtype);
  std::string head, tail;
  if (header != nullptr) header->SerializeToString(&head);
  if (pull != nullptr) pull->SerializeToString(&tail);
  const size_t head_field = header == nullptr ? 0 : 1 + VarintSize(head.size()) + head.size();
  const size_t pull_field = pull == nullptr ? 0 : 1 + VarintSize(tail.size()) + tail.size();
  // Fields in field-number order, as protobuf writes them.
  return OneSlice(head_field + chunk.FieldBytes(2) + pull_field, pool, [&](uint8_t* p) {
    if (header != nullptr) {
      *p++ = static_cast<uint8_t>(Tag(1, kLen));
      p = PutVarint(p, head.size());
      std::memcpy(p, head.data(), head.size());
      p += head.size();
    }
    p = chunk.Write(p, 2, values);
    if (pull != nullptr) {
      *p++ = static_cast<uint8_t>(Tag(3, kLen));
      p = PutVarint(p, tail.size());
      std::memcpy(p, tail.data(), tail.size());
      p += tail.size();
    }
    return p;
  });
}

grpc::ByteBuffer EncodePullFrame(const PullFrameHead* head, std::span<const float> values,
                                 int64_t offset, v1::WireDType dtype, FramePool* pool) {
  const ChunkLayout chunk(values, offset, dtype);
  size_t head_bytes = 0;
  if (head != nullptr) {
    head_bytes = VarintFieldSize(static_cast<uint64_t>(head->global_step)) +
                 VarintFieldSize(head->incarnation) + (head->finished ? 2 : 0);
  }
  return OneSlice(head_bytes + chunk.FieldBytes(4), pool, [&](uint8_t* p) {
    if (head != nullptr) {
      p = PutVarintField(p, 1, static_cast<uint64_t>(head->global_step));
      p = PutVarintField(p, 2, head->incarnation);
      p = PutVarintField(p, 3, head->finished ? 1 : 0);
    }
    return chunk.Write(p, 4, values);
  });
}

absl::StatusOr<ReceivedFrame> ReceivedFrame::ParsePush(const grpc::ByteBuffer& buffer) {
  return Parse(buffer, Kind::kPush);
}

absl::StatusOr<ReceivedFrame> ReceivedFrame::ParsePull(const grpc::ByteBuffer& buffer) {
  return Parse(buffer, Kind::kPull);
}

absl::StatusOr<ReceivedFrame> ReceivedFrame::Parse(const grpc::ByteBuffer& buffer, Kind kind) {
  const char* what = kind == Kind::kPush ? "push" : "pull";
  ReceivedFrame f;
  if (grpc::Status s = buffer.Dump(&f.slices_); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read a ", what, " frame: ", s.error_message()));
  }
  Cursor c(f.slices_);
  const size_t total = buffer.Length();
  const uint32_t chunk_field = kind == Kind::kPush ? 2 : 4;
  std::string bytes;
  while (c.consumed() < total) {
    uint64_t tag;
    if (!c.ReadVarint(&tag)) return Malformed(what, "truncated tag");
    const uint32_t field = static_cast<uint32_t>(tag >> 3), type = static_cast<uint32_t>(tag & 7);
    if (field == chunk_field && type == kLen) {
      if (f.has_chunk_) return Malformed(what, "more than one chunk");
      uint64_t len;
      if (!c.ReadVarint(&len) || c.consumed() + len > total) {
        return Malformed(what, "truncated chunk");
      }
      f.has_chunk_ = true;
      const size_t end = c.consumed() + len;
      bool has_data = false;
      while (c.consumed() < end) {
        uint64_t t;
        if (!c.ReadVarint(&t)) return Malformed(what, "truncated chunk tag");
        const uint32_t cf = static_cast<uint32_t>(t >> 3), ct = static_cast<uint32_t>(t & 7);
        uint64_t v;
        if (cf == 1 && ct == kLen) {
          v1::ParameterRange range;
          if (!c.ReadVarint(&v) || c.consumed() + v > end || !c.ReadString(v, &bytes) ||
              !range.ParseFromString(bytes)) {
            return Malformed(what, "bad chunk range");
          }
          f.offset_ = static_cast<int64_t>(range.offset());
          f.length_ = static_cast<int64_t>(range.length());
        } else if (cf == 2 && ct == kVarint) {
          if (!c.ReadVarint(&v)) return Malformed(what, "truncated dtype");
          f.dtype_ = static_cast<v1::WireDType>(static_cast<int32_t>(v));
        } else if (cf == 3 && ct == kLen) {
          if (has_data) return Malformed(what, "more than one data field in a chunk");
          if (!c.ReadVarint(&v) || c.consumed() + v > end) {
            return Malformed(what, "truncated chunk data");
          }
          has_data = true;
          f.data_slice_ = c.slice();
          f.data_pos_ = c.pos();
          f.data_bytes_ = v;
          c.Skip(v);
        } else if (cf == 4 && ct == kFixed32) {
          uint32_t crc = 0;
          for (int i = 0; i < 4; ++i) {
            uint8_t b;
            if (!c.ReadByte(&b)) return Malformed(what, "truncated crc32c");
            crc |= static_cast<uint32_t>(b) << (8 * i);
          }
          f.crc32c_ = crc;
        } else if (!SkipField(c, ct)) {
          return Malformed(what, "bad field in chunk");
        }
        if (c.consumed() > end) return Malformed(what, "chunk field overruns the chunk");
      }
      continue;
    }
    uint64_t v;
    if (kind == Kind::kPush && field == 1 && type == kLen) {
      v1::PushHeader h;
      if (!c.ReadVarint(&v) || c.consumed() + v > total || !c.ReadString(v, &bytes) ||
          !h.ParseFromString(bytes)) {
        return Malformed(what, "bad header");
      }
      f.header_ = std::move(h);
    } else if (kind == Kind::kPush && field == 3 && type == kLen) {
      v1::PullRequest r;
      if (!c.ReadVarint(&v) || c.consumed() + v > total || !c.ReadString(v, &bytes) ||
          !r.ParseFromString(bytes)) {
        return Malformed(what, "bad pull request");
      }
      f.pull_ = std::move(r);
    } else if (kind == Kind::kPull && field >= 1 && field <= 3 && type == kVarint) {
      if (!c.ReadVarint(&v)) return Malformed(what, "truncated field");
      if (field == 1) f.pull_head_.global_step = static_cast<int64_t>(v);
      if (field == 2) f.pull_head_.incarnation = v;
      if (field == 3) f.pull_head_.finished = v != 0;
    } else if (!SkipField(c, type)) {
      return Malformed(what, "bad field");
    }
  }
  if (c.consumed() != total) return Malformed(what, "field overruns the message");
  return f;
}

absl::Status ReceivedFrame::DecodeInto(std::span<float> out, int64_t* nonfinite) const {
  if (dtype_ != v1::WIRE_DTYPE_F32 && dtype_ != v1::WIRE_DTYPE_F16) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported wire dtype ", dtype_));
  }
  const size_t want = out.size() * WireBytesPerElement(dtype_);
  if (data_bytes_ != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk at offset ", offset_, " has ", data_bytes_, " bytes, expected ", want));
  }
  // Walks the data bytes slice by slice into `dst`, `n` bytes at a time.
  size_t slice = data_slice_, pos = data_pos_;
  auto gather = [&](uint8_t* dst, size_t n) {
    while (n > 0) {
      const grpc::Slice& s = slices_[slice];
      const size_t k = std::min(n, s.size() - pos);
      std::memcpy(dst, s.begin() + pos, k);
      dst += k;
      n -= k;
      pos += k;
      if (pos == s.size()) {
        ++slice;
        pos = 0;
      }
    }
  };
  uint32_t crc = 0;
  int64_t bad = 0;
  if (dtype_ == v1::WIRE_DTYPE_F16) {
    alignas(64) uint16_t half[kBlockBytes / 2];
    for (size_t i = 0; i < out.size(); i += kBlockBytes / 2) {
      const size_t n = std::min(kBlockBytes / 2, out.size() - i);
      gather(reinterpret_cast<uint8_t*>(half), n * 2);
      crc = base::Crc32cExtend(crc, half, n * 2);
      base::HalvesToFloats(half, n, out.data() + i);
      if (nonfinite != nullptr) bad += CountNonFinite(out.data() + i, n);
    }
  } else {
    auto* dst = reinterpret_cast<uint8_t*>(out.data());
    for (size_t off = 0; off < want; off += kBlockBytes) {
      const size_t n = std::min(kBlockBytes, want - off);
      gather(dst + off, n);
      crc = base::Crc32cExtend(crc, dst + off, n);
      if (nonfinite != nullptr) bad += CountNonFinite(out.data() + off / 4, n / 4);
    }
  }
  if (crc != crc32c_) {
    return absl::DataLossError(absl::StrCat("chunk at offset ", offset_, " failed its checksum"));
  }
  if (nonfinite != nullptr) *nonfinite += bad;
  return absl::OkStatus();
}

bool WritePushFrames(const v1::PushHeader& header, std::span<const float> values, int64_t offset,
                     v1::WireDType dtype, FramePool* pool, const v1::PullRequest* pull,
                     const std::function<bool(const grpc::ByteBuffer&)>& write) {
  const int64_t n = static_cast<int64_t>(values.size());
  for (int64_t off = 0; off < n; off += kChunkElements) {
    const int64_t len = std::min(kChunkElements, n - off);
    if (!write(EncodePushFrame(off == 0 ? &header : nullptr,
                               values.subspan(static_cast<size_t>(off), static_cast<size_t>(len)),
                               offset + off, dtype, pool, off + len == n ? pull : nullptr))) {
      return false;
    }
  }
  return true;
}

}  // namespace kubetrain::ps
