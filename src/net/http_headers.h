// HttpHeaders: an ordered list of HTTP header fields with case-insensitive lookup.
//
// Field names keep the spelling they were added with; lookups ignore ASCII case, as
// RFC 9110 requires. Duplicates are allowed (Add) or collapsed (Set).
//
// Thread safety: a value type; concurrent const access is safe, mutation is not.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::net {

// True when `a` and `b` are equal ignoring ASCII case.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

class HttpHeaders {
 public:
  using Field = std::pair<std::string, std::string>;  // {name, value}

  HttpHeaders() = default;
  HttpHeaders(std::initializer_list<Field> fields);

  // Appends a field (an existing field of the same name is kept).
  void Add(std::string name, std::string value);
  // Replaces every field named `name` with one field.
  void Set(std::string name, std::string value);
  // Removes every field named `name`.
  void Remove(std::string_view name);

  // The value of the first field named `name`, or nullopt. The view borrows from this
  // object and is invalidated by any mutation.
  std::optional<std::string_view> Get(std::string_view name) const;
  // The first value, or `fallback` when absent.
  std::string GetOr(std::string_view name, std::string_view fallback) const;
  bool Has(std::string_view name) const { return Get(name).has_value(); }

  size_t size() const { return fields_.size(); }
  bool empty() const { return fields_.empty(); }
  std::vector<Field>::const_iterator begin() const { return fields_.begin(); }
  std::vector<Field>::const_iterator end() const { return fields_.end(); }

 private:
  std::vector<Field> fields_;
};

}  // namespace tandem::net
