#include "model/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

namespace tandem {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
// Limits that keep a corrupted header from driving huge allocations before the
// bounds checks against the file size catch it.
constexpr uint64_t kMaxStringBytes = uint64_t{1} << 30;
constexpr int kMaxArrayDepth = 8;
constexpr uint32_t kMaxDims = 4;

// A cursor over [data, data+size) whose every read is bounds-checked.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  Status Read(T* out, const char* what) {
    if (remaining() < sizeof(T)) return Truncated(what);
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status ReadString(std::string_view* out, const char* what) {
    uint64_t len = 0;
    TANDEM_RETURN_IF_ERROR(Read(&len, what));
    if (len > kMaxStringBytes || len > remaining()) {
      return DataLossError(std::string("string length ") + std::to_string(len) + " of " + what +
                           " at offset " + std::to_string(pos_ - 8) + " exceeds the file");
    }
    *out = std::string_view(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::Ok();
  }

  Status Truncated(const char* what) const {
    return DataLossError(std::string("file truncated while reading ") + what + " at offset " +
                         std::to_string(pos_));
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Minimal on-disk size of one element of `type` (used to reject impossible array counts).
uint64_t MinElementBytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
    case GgufValueType::kString: return 8;   // the length prefix
    case GgufValueType::kArray: return 12;   // type + count
  }
  return 1;
}

bool IsValidValueType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

Status ReadValue(Reader& r, GgufValueType type, int depth, GgufValue* out);

Status ReadValue(Reader& r, GgufValueType type, int depth, GgufValue* out) {
  out->type = type;
  switch (type) {
    case GgufValueType::kUint8: { uint8_t v = 0; TANDEM_RETURN_IF_ERROR(r.Read(&v, "uint8 value")); out->u64 = v; break; }
    case GgufValueType::kUint16: { uint16_t v = 0; TANDEM_RETURN_IF_ERROR(r.Read(&v, "uint16 value")); out->u64 = v; break; }
    case GgufValueType::kUint32: { uint32_t v = 0; TANDEM_RETURN_IF_ERROR(r.Read(&v, "uint32 value")); out->u64 = v; break; }
    case GgufValueType::kUint64: { uint64_t v = 0; TANDEM_RETURN_IF_ERROR(r.Read(&v, "uint64 value")); out->u64 = v; break; }
    case GgufValueType::kInt8: { int8_t v = 0; TANDEM_RETURN_IF_ERROR(r.Read(&v, "int8 value")); out->i64 = v; break; }
    case GgufValueType::kInt16: { int16_t v = 0; TANDEM_RETURN_IF_ERROR(r.Read(&v, "int16 value")); out->i64 = v; break; }
    case GgufValueType::kInt32: { int32_t v = 0; TANDEM_RETURN_IF_ERROR(r.Read(&v, "int32 value")); out->i64 = v; break; }
    case GgufValueType::kInt64: { int64_t v = 0; TANDEM_RETURN_IF_ERROR(r.Read(&v, "int64 value")); out->i64 = v; break; }
    case GgufValueType::kFloat32: { float v = 0; TANDEM_RETURN_IF_ERROR(r.Read(&v, "float32 value")); out->f64 = v; break; }
    case GgufValueType::kFloat64: { double v = 0; TANDEM_RETURN_IF_ERROR(r.Read(&v, "float64 value")); out->f64 = v; break; }
    case GgufValueType::kBool: {
      uint8_t v = 0;
      TANDEM_RETURN_IF_ERROR(r.Read(&v, "bool value"));
      if (v > 1) return DataLossError("bool value " + std::to_string(v) + " is neither 0 nor 1");
      out->b = v != 0;
      break;
    }
    case GgufValueType::kString: TANDEM_RETURN_IF_ERROR(r.ReadString(&out->str, "string value")); break;
    case GgufValueType::kArray: {
      if (depth >= kMaxArrayDepth) return DataLossError("arrays nested deeper than 8 levels");
      uint32_t elem_type = 0;
      uint64_t count = 0;
      TANDEM_RETURN_IF_ERROR(r.Read(&elem_type, "array element type"));
      if (!IsValidValueType(elem_type)) {
        return DataLossError("unknown array element type " + std::to_string(elem_type));
      }
      TANDEM_RETURN_IF_ERROR(r.Read(&count, "array length"));
      out->array_type = static_cast<GgufValueType>(elem_type);
      if (count > r.remaining() / MinElementBytes(out->array_type)) {
        return DataLossError("array of " + std::to_string(count) + " elements exceeds the file");
      }
      out->array.resize(count);
      for (uint64_t i = 0; i < count; ++i) {
        TANDEM_RETURN_IF_ERROR(ReadValue(r, out->array_type, depth + 1, &out->array[i]));
      }
      break;
    }
  }
  return Status::Ok();
}

bool MulOverflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFoundError("model file not found: " + path);
    return UnavailableError("cannot open " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + " is not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return DataLossError(path + " is empty");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return UnavailableError("mmap of " + path + " failed: " + std::strerror(errno));
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  file->base_ = static_cast<const uint8_t*>(map);
  file->size_ = size;
  file->owns_mapping_ = true;
  Status s = file->Parse();
  if (!s.ok()) return s.WithContext(path);
  return file;
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(const uint8_t* data, size_t size) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = "<buffer>";
  file->base_ = data;
  file->size_ = size;
  TANDEM_RETURN_IF_ERROR(file->Parse());
  return file;
}

GgufFile::~GgufFile() {
  if (owns_mapping_ && base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), size_);
}

Status GgufFile::Parse() {
  Reader r(base_, size_);
  uint32_t magic = 0;
  TANDEM_RETURN_IF_ERROR(r.Read(&magic, "magic"));
  if (magic != kMagic) return InvalidArgumentError("not a GGUF file (bad magic)");
  TANDEM_RETURN_IF_ERROR(r.Read(&version_, "version"));
  if (version_ != 2 && version_ != 3) {
    return UnimplementedError("unsupported GGUF version " + std::to_string(version_) +
                              " (supported: 2, 3)");
  }
  uint64_t n_tensors = 0, n_kv = 0;
  TANDEM_RETURN_IF_ERROR(r.Read(&n_tensors, "tensor count"));
  TANDEM_RETURN_IF_ERROR(r.Read(&n_kv, "metadata count"));
  // Each kv needs >= 8 (key len) + 4 (type) + 1 bytes; each tensor info >= 8 + 4 + 4 + 8.
  if (n_kv > r.remaining() / 13) return DataLossError("metadata count " + std::to_string(n_kv) + " exceeds the file");
  if (n_tensors > r.remaining() / 24) return DataLossError("tensor count " + std::to_string(n_tensors) + " exceeds the file");

  metadata_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string_view key;
    TANDEM_RETURN_IF_ERROR(r.ReadString(&key, "metadata key"));
    uint32_t type = 0;
    TANDEM_RETURN_IF_ERROR(r.Read(&type, "metadata value type"));
    if (!IsValidValueType(type)) {
      return DataLossError("metadata key '" + std::string(key) + "' has unknown value type " +
                           std::to_string(type));
    }
    GgufValue value;
    Status s = ReadValue(r, static_cast<GgufValueType>(type), 0, &value);
    if (!s.ok()) return s.WithContext("metadata key '" + std::string(key) + "'");
    TANDEM_RETURN_IF_ERROR(AddMetadata(std::string(key), std::move(value)));
  }

  if (const GgufValue* a = Find("general.alignment")) {
    if (!a->IsInteger() || a->u64 == 0 || (a->u64 & (a->u64 - 1)) != 0 || a->u64 > 1024 * 1024) {
      return DataLossError("general.alignment must be a power of two integer");
    }
    alignment_ = a->u64;
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo info;
    std::string_view name;
    TANDEM_RETURN_IF_ERROR(r.ReadString(&name, "tensor name"));
    info.name = std::string(name);
    uint32_t n_dims = 0;
    TANDEM_RETURN_IF_ERROR(r.Read(&n_dims, "tensor dims count"));
    if (n_dims > kMaxDims) {
      return DataLossError("tensor '" + info.name + "' has " + std::to_string(n_dims) +
                           " dims (max 4)");
    }
    int64_t n_elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      int64_t dim = 0;
      TANDEM_RETURN_IF_ERROR(r.Read(&dim, "tensor dim"));
      if (dim < 0) return DataLossError("tensor '" + info.name + "' has a negative dimension");
      if (MulOverflows(n_elems, dim, &n_elems)) {
        return DataLossError("tensor '" + info.name + "' element count overflows");
      }
      info.dims.push_back(dim);
    }
    uint32_t type = 0;
    TANDEM_RETURN_IF_ERROR(r.Read(&type, "tensor type"));
    auto traits = GetTensorTypeTraits(type);
    if (!traits) {
      return UnimplementedError("tensor '" + info.name + "' has unsupported type id " +
                                std::to_string(type));
    }
    info.type = static_cast<TensorType>(type);
    TANDEM_RETURN_IF_ERROR(r.Read(&info.offset, "tensor offset"));
    if (info.offset % alignment_ != 0) {
      return DataLossError("tensor '" + info.name + "' offset is not aligned");
    }
    if (!info.dims.empty() && info.dims[0] % traits->block_elems != 0) {
      return DataLossError("tensor '" + info.name + "' row length " + std::to_string(info.dims[0]) +
                           " is not a multiple of the " + std::string(traits->name) + " block size");
    }
    int64_t bytes = 0;
    if (MulOverflows(n_elems / traits->block_elems, traits->block_bytes, &bytes)) {
      return DataLossError("tensor '" + info.name + "' byte size overflows");
    }
    info.num_elements = n_elems;
    info.size_bytes = static_cast<uint64_t>(bytes);
    TANDEM_RETURN_IF_ERROR(AddTensor(std::move(info)));
  }

  // The data section starts at the next multiple of the alignment.
  uint64_t data_start = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_start > size_) return DataLossError("file truncated before the tensor data");
  for (GgufTensorInfo& t : tensors_) {
    uint64_t avail = size_ > data_start ? size_ - data_start : 0;
    if (t.offset > avail || t.size_bytes > avail - t.offset) {
      return DataLossError("tensor '" + t.name + "' data (offset " + std::to_string(t.offset) +
                           ", " + std::to_string(t.size_bytes) + " bytes) runs past the end of the file");
    }
    t.data = base_ + data_start + t.offset;
  }
  return Status::Ok();
}

}  // namespace tandem
