#include "model/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "common/json_depth.h"
#include "common/little_endian.h"

namespace tandem {
namespace {

using Json = nlohmann::json;

struct DtypeInfo {
  SafetensorsDtype dtype;
  std::string_view name;
  int size;
};

constexpr DtypeInfo kDtypes[] = {
    {SafetensorsDtype::kBool, "BOOL", 1},     {SafetensorsDtype::kU8, "U8", 1},
    {SafetensorsDtype::kI8, "I8", 1},         {SafetensorsDtype::kF8E5M2, "F8_E5M2", 1},
    {SafetensorsDtype::kF8E4M3, "F8_E4M3", 1}, {SafetensorsDtype::kI16, "I16", 2},
    {SafetensorsDtype::kU16, "U16", 2},       {SafetensorsDtype::kF16, "F16", 2},
    {SafetensorsDtype::kBF16, "BF16", 2},     {SafetensorsDtype::kI32, "I32", 4},
    {SafetensorsDtype::kU32, "U32", 4},       {SafetensorsDtype::kF32, "F32", 4},
    {SafetensorsDtype::kF64, "F64", 8},       {SafetensorsDtype::kI64, "I64", 8},
    {SafetensorsDtype::kU64, "U64", 8},
};

const DtypeInfo& Info(SafetensorsDtype dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return d;
  }
  return kDtypes[0];  // unreachable: every enumerator is listed
}

// A JSON number that is a non-negative integer, as uint64.
bool AsUint(const Json& j, uint64_t* out) {
  if (j.is_number_unsigned()) {
    *out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(j.get<int64_t>());
    return true;
  }
  return false;
}

// One tensor entry of the header; `name` for the messages.
Status ParseEntry(const std::string& name, const Json& entry, SafetensorsTensor* t) {
  const std::string where = "tensor '" + name + "'";
  if (!entry.is_object()) return InvalidArgumentError(where + ": not an object");
  for (const auto& [key, value] : entry.items()) {
    (void)value;
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return InvalidArgumentError(where + ": unknown key '" + key + "'");
    }
  }
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) return InvalidArgumentError(where + ": dtype must be a string");
  if (!ParseSafetensorsDtype(dtype->get<std::string>(), &t->dtype)) {
    return InvalidArgumentError(where + ": unknown dtype '" + dtype->get<std::string>() + "'");
  }
  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) return InvalidArgumentError(where + ": shape must be an array");
  uint64_t elements = 1;
  for (const Json& d : *shape) {
    uint64_t dim = 0;
    if (!AsUint(d, &dim)) return InvalidArgumentError(where + ": shape entries must be non-negative integers");
    if (dim != 0 && elements > std::numeric_limits<uint64_t>::max() / 8 / dim) {
      return InvalidArgumentError(where + ": shape too large");
    }
    elements *= dim;
    t->shape.push_back(static_cast<int64_t>(dim));
  }
  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 || !AsUint((*offsets)[0], &t->begin) ||
      !AsUint((*offsets)[1], &t->end)) {
    return InvalidArgumentError(where + ": data_offsets must be [begin, end] of non-negative integers");
  }
  if (t->end < t->begin) return InvalidArgumentError(where + ": data_offsets end before begin");
  const uint64_t expected = elements * static_cast<uint64_t>(SafetensorsDtypeSize(t->dtype));
  if (t->end - t->begin != expected) {
    return InvalidArgumentError(where + ": " + std::to_string(t->end - t->begin) + " bytes in data_offsets, but " +
                                std::string(SafetensorsDtypeName(t->dtype)) + " x shape needs " +
                                std::to_string(expected));
  }
  t->name = name;
  t->num_elements = static_cast<int64_t>(elements);
  return Status::Ok();
}

}  // namespace

bool ParseSafetensorsDtype(std::string_view name, SafetensorsDtype* dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.name == name) {
      *dtype = d.dtype;
      return true;
    }
  }
  return false;
}

std::string_view SafetensorsDtypeName(SafetensorsDtype dtype) { return Info(dtype).name; }

int SafetensorsDtypeSize(SafetensorsDtype dtype) { return Info(dtype).size; }

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFoundError("safetensors file not found: " + path);
    return UnavailableError("cannot open " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + " is not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = nullptr;
  if (size > 0) {
    map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return UnavailableError("mmap of " + path + " failed: " + std::strerror(err));
    }
  }
  ::close(fd);
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->base_ = static_cast<const uint8_t*>(map);
  file->size_ = size;
  file->owns_mapping_ = map != nullptr;
  Status s = file->Parse();
  if (!s.ok()) return s.WithContext(path);
  return file;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromBuffer(const uint8_t* data, size_t size) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = "<buffer>";
  file->base_ = data;
  file->size_ = size;
  TANDEM_RETURN_IF_ERROR(file->Parse());
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (owns_mapping_ && base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), size_);
}

Status SafetensorsFile::Parse() {
  if (size_ < 8) return DataLossError("truncated: " + std::to_string(size_) + " bytes, no 8-byte header length");
  const uint64_t n = little_endian::Load<uint64_t>(base_);
  if (n > kMaxHeaderBytes) {
    return InvalidArgumentError("header of " + std::to_string(n) + " bytes is over the limit of " +
                                std::to_string(kMaxHeaderBytes));
  }
  if (n > size_ - 8) {
    return DataLossError("truncated: the header says " + std::to_string(n) + " bytes, the file has " +
                         std::to_string(size_ - 8) + " after the length");
  }
  const std::string_view text(reinterpret_cast<const char*>(base_ + 8), n);
  if (text.empty() || text.front() != '{') return InvalidArgumentError("the header does not start with '{'");
  if (JsonNestingExceeds(text, 8)) return InvalidArgumentError("the header nests deeper than a safetensors header");
  Json header = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return InvalidArgumentError("the header is not valid JSON");
  if (!header.is_object()) return InvalidArgumentError("the header is not a JSON object");
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return InvalidArgumentError("__metadata__ must be an object of strings");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) return InvalidArgumentError("__metadata__." + key + " must be a string");
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    SafetensorsTensor t;
    TANDEM_RETURN_IF_ERROR(ParseEntry(name, entry, &t));
    tensors_.push_back(std::move(t));
  }
  // Sorted by their data, the tensors must tile [0, data size) exactly.
  std::sort(tensors_.begin(), tensors_.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const uint64_t data_size = size_ - 8 - n;
  uint64_t expected_begin = 0;
  for (SafetensorsTensor& t : tensors_) {
    if (t.begin != expected_begin) {
      return InvalidArgumentError("tensor '" + t.name + "': data_offsets begin at " + std::to_string(t.begin) +
                                  ", expected " + std::to_string(expected_begin) +
                                  (t.begin < expected_begin ? " (overlaps the previous tensor)" : " (a hole before it)"));
    }
    if (t.end > data_size) {
      return DataLossError("tensor '" + t.name + "': data_offsets end at " + std::to_string(t.end) +
                           ", past the data's " + std::to_string(data_size) + " bytes (truncated file?)");
    }
    t.data = base_ + 8 + n + t.begin;
    expected_begin = t.end;
  }
  if (expected_begin != data_size) {
    return InvalidArgumentError("the tensors' data ends at " + std::to_string(expected_begin) + " but the file has " +
                                std::to_string(data_size) + " data bytes");
  }
  for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
  return Status::Ok();
}

const SafetensorsTensor* SafetensorsFile::FindTensor(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<std::string> SafetensorsIndex::shards() const {
  std::set<std::string> files;
  for (const auto& [tensor, file] : weight_map) files.insert(file);
  return {files.begin(), files.end()};
}

StatusOr<SafetensorsIndex> ParseSafetensorsIndex(std::string_view json_text, const std::string& source) {
  if (JsonNestingExceeds(json_text, 8)) return InvalidArgumentError(source + ": nests too deep for an index");
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError(source + ": not a JSON object");
  SafetensorsIndex index;
  if (auto meta = j.find("metadata"); meta != j.end() && !meta->is_null()) {
    if (!meta->is_object()) return InvalidArgumentError(source + ": metadata must be an object");
    if (auto total = meta->find("total_size"); total != meta->end()) {
      uint64_t v = 0;
      if (!AsUint(*total, &v)) return InvalidArgumentError(source + ": metadata.total_size must be a non-negative integer");
      index.total_size = static_cast<int64_t>(v);
    }
  }
  auto map = j.find("weight_map");
  if (map == j.end() || !map->is_object()) return InvalidArgumentError(source + ": weight_map must be an object");
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string()) return InvalidArgumentError(source + ": weight_map." + tensor + " must be a file name");
    const std::string name = file.get<std::string>();
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\\') != std::string::npos) {
      return InvalidArgumentError(source + ": weight_map." + tensor + " names '" + name +
                                  "', not a file in the checkpoint's folder");
    }
    index.weight_map[tensor] = name;
  }
  if (index.weight_map.empty()) return InvalidArgumentError(source + ": weight_map is empty");
  return index;
}

}  // namespace tandem
