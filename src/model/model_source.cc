#include "model/model_source.h"

#include <limits>

namespace tandem {

std::string_view GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: return "uint8";
    case GgufValueType::kInt8: return "int8";
    case GgufValueType::kUint16: return "uint16";
    case GgufValueType::kInt16: return "int16";
    case GgufValueType::kUint32: return "uint32";
    case GgufValueType::kInt32: return "int32";
    case GgufValueType::kFloat32: return "float32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "uint64";
    case GgufValueType::kInt64: return "int64";
    case GgufValueType::kFloat64: return "float64";
  }
  return "unknown";
}

bool GgufValue::IsInteger() const {
  switch (type) {
    case GgufValueType::kUint8: case GgufValueType::kInt8: case GgufValueType::kUint16:
    case GgufValueType::kInt16: case GgufValueType::kUint32: case GgufValueType::kInt32:
    case GgufValueType::kUint64: case GgufValueType::kInt64: return true;
    default: return false;
  }
}

bool GgufValue::IsFloat() const {
  return type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64;
}

namespace {
bool IsUnsigned(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 ||
         t == GgufValueType::kUint32 || t == GgufValueType::kUint64;
}
}  // namespace

const GgufValue* ModelSource::Find(std::string_view key) const {
  auto it = metadata_index_.find(std::string(key));
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensorInfo* ModelSource::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
Status Missing(std::string_view key) { return NotFoundError("metadata key '" + std::string(key) + "' not found"); }
Status WrongType(std::string_view key, const GgufValue& v, const char* want) {
  return InvalidArgumentError("metadata key '" + std::string(key) + "' is " +
                              std::string(GgufValueTypeName(v.type)) + ", expected " + want);
}
}  // namespace

StatusOr<std::string> ModelSource::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (v->type != GgufValueType::kString) return WrongType(key, *v, "string");
  return std::string(v->str);
}

StatusOr<uint64_t> ModelSource::GetUint(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (!v->IsInteger()) return WrongType(key, *v, "an unsigned integer");
  if (IsUnsigned(v->type)) return v->u64;
  if (v->i64 < 0) return InvalidArgumentError("metadata key '" + std::string(key) + "' is negative");
  return static_cast<uint64_t>(v->i64);
}

StatusOr<int64_t> ModelSource::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (!v->IsInteger()) return WrongType(key, *v, "an integer");
  if (!IsUnsigned(v->type)) return v->i64;
  if (v->u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgumentError("metadata key '" + std::string(key) + "' overflows int64");
  }
  return static_cast<int64_t>(v->u64);
}

StatusOr<double> ModelSource::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (v->IsFloat()) return v->f64;
  if (v->IsInteger()) return IsUnsigned(v->type) ? static_cast<double>(v->u64) : static_cast<double>(v->i64);
  return WrongType(key, *v, "a number");
}

StatusOr<bool> ModelSource::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (v->type != GgufValueType::kBool) return WrongType(key, *v, "bool");
  return v->b;
}

StatusOr<std::vector<std::string>> ModelSource::GetStringArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (v->type != GgufValueType::kArray || v->array_type != GgufValueType::kString) {
    return WrongType(key, *v, "array of string");
  }
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) out.emplace_back(e.str);
  return out;
}

StatusOr<std::vector<float>> ModelSource::GetFloatArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (v->type != GgufValueType::kArray) return WrongType(key, *v, "array of numbers");
  std::vector<float> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) {
    if (e.IsFloat()) out.push_back(static_cast<float>(e.f64));
    else if (e.IsInteger()) out.push_back(IsUnsigned(e.type) ? static_cast<float>(e.u64) : static_cast<float>(e.i64));
    else return WrongType(key, *v, "array of numbers");
  }
  return out;
}

StatusOr<std::vector<int64_t>> ModelSource::GetIntArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(key);
  if (v->type != GgufValueType::kArray) return WrongType(key, *v, "array of integers");
  std::vector<int64_t> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) {
    if (!e.IsInteger()) return WrongType(key, *v, "array of integers");
    out.push_back(IsUnsigned(e.type) ? static_cast<int64_t>(e.u64) : e.i64);
  }
  return out;
}

StatusOr<uint64_t> ModelSource::GetUintOr(std::string_view key, uint64_t fallback) const {
  if (!Find(key)) return fallback;
  return GetUint(key);
}
StatusOr<double> ModelSource::GetFloatOr(std::string_view key, double fallback) const {
  if (!Find(key)) return fallback;
  return GetFloat(key);
}
StatusOr<bool> ModelSource::GetBoolOr(std::string_view key, bool fallback) const {
  if (!Find(key)) return fallback;
  return GetBool(key);
}
StatusOr<std::string> ModelSource::GetStringOr(std::string_view key, std::string fallback) const {
  if (!Find(key)) return fallback;
  return GetString(key);
}

Status ModelSource::AddMetadata(std::string key, GgufValue value) {
  if (metadata_index_.count(key)) return DataLossError("duplicate metadata key '" + key + "'");
  metadata_index_[key] = metadata_.size();
  metadata_.emplace_back(std::move(key), std::move(value));
  return Status::Ok();
}

Status ModelSource::AddTensor(GgufTensorInfo tensor) {
  if (tensor_index_.count(tensor.name)) return DataLossError("duplicate tensor '" + tensor.name + "'");
  tensor_index_[tensor.name] = tensors_.size();
  tensors_.push_back(std::move(tensor));
  return Status::Ok();
}

std::string_view ModelSource::KeepString(std::string s) {
  strings_.push_back(std::move(s));
  return strings_.back();
}

}  // namespace tandem
