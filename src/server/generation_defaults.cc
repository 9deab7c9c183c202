#include "server/generation_defaults.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace tandem::server {
namespace {

using Json = nlohmann::json;

// Reads the sampling keys of `j` into `d` (keys absent or null are left as they are).
Status ReadKeys(const Json& j, const std::string& where, GenerationDefaults* d) {
  if (!j.is_object()) return InvalidArgumentError(where + ": must be a JSON object");
  auto number = [&](const char* key, double lo, double hi, std::optional<double>* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status::Ok();
    if (!it->is_number() || !(it->get<double>() >= lo && it->get<double>() <= hi)) {
      return InvalidArgumentError(where + ": '" + key + "' must be a number in [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "], got " + it->dump());
    }
    *out = it->get<double>();
    return Status::Ok();
  };
  auto integer = [&](const char* key, int64_t lo, std::optional<int64_t>* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status::Ok();
    if (!it->is_number_integer() || it->get<int64_t>() < lo) {
      return InvalidArgumentError(where + ": '" + key + "' must be an integer >= " + std::to_string(lo) +
                                  ", got " + it->dump());
    }
    *out = it->get<int64_t>();
    return Status::Ok();
  };
  TANDEM_RETURN_IF_ERROR(number("temperature", 0, 1e6, &d->temperature));
  TANDEM_RETURN_IF_ERROR(number("top_p", 1e-9, 1, &d->top_p));
  TANDEM_RETURN_IF_ERROR(number("min_p", 0, 1, &d->min_p));
  TANDEM_RETURN_IF_ERROR(number("repetition_penalty", 1e-9, 1e6, &d->repetition_penalty));
  TANDEM_RETURN_IF_ERROR(integer("top_k", -1, &d->top_k));
  TANDEM_RETURN_IF_ERROR(integer("max_new_tokens", 1, &d->max_tokens));
  return Status::Ok();
}

Status ReadFile(const std::filesystem::path& path, GenerationDefaults* d) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("--generation-config: cannot read " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError(path.string() + " is not valid JSON");
  return ReadKeys(j, path.string(), d);
}

}  // namespace

StatusOr<GenerationDefaults> LoadGenerationDefaults(const std::string& mode, const std::string& model_path,
                                                    const std::string& override_json) {
  namespace fs = std::filesystem;
  GenerationDefaults d;
  std::error_code ec;
  if (mode == "auto") {
    const fs::path file = fs::path(model_path) / "generation_config.json";
    if (fs::is_directory(model_path, ec) && fs::is_regular_file(file, ec)) TANDEM_RETURN_IF_ERROR(ReadFile(file, &d));
  } else if (mode != "vllm") {
    if (!fs::is_directory(mode, ec)) {
      return InvalidArgumentError("--generation-config: '" + mode + "' is neither auto, vllm nor a folder");
    }
    TANDEM_RETURN_IF_ERROR(ReadFile(fs::path(mode) / "generation_config.json", &d));
  }
  if (!override_json.empty()) {
    Json j = Json::parse(override_json, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return InvalidArgumentError("--override-generation-config is not valid JSON");
    TANDEM_RETURN_IF_ERROR(ReadKeys(j, "--override-generation-config", &d));
  }
  return d;
}

std::string DescribeGenerationDefaults(const GenerationDefaults& d) {
  std::ostringstream s;
  auto put = [&](const char* name, auto v) {
    if (v) s << (s.tellp() > 0 ? " " : "") << name << "=" << *v;
  };
  put("temperature", d.temperature);
  put("top_p", d.top_p);
  put("top_k", d.top_k);
  put("min_p", d.min_p);
  put("repetition_penalty", d.repetition_penalty);
  put("max_new_tokens", d.max_tokens);
  return s.str();
}

}  // namespace tandem::server
