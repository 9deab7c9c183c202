// `tandem dump-tensors`: one forward pass with its intermediate tensors written as .npy
// files (engine/tensor_dump.h), to compare with llama.cpp's (tools/compare_tensors.py).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli/commands.h"
#include "cli/common_flags.h"
#include "engine/tensor_dump.h"

namespace tandem::cli {

namespace {

StatusOr<std::vector<int32_t>> ParseTokenIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX) {
      return InvalidArgumentError("--tokens: '" + item + "' is not a token id");
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

}  // namespace

void RegisterDumpTensors(CLI::App& app, RunFn* run) {
  struct Flags {
    ModelFlags model;
    std::string tokens;
    std::string prompt;
    std::vector<std::string> names;
    std::string out;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "dump-tensors", "write a forward pass's intermediate tensors (llama.cpp's names) as .npy files");
  AddModelFlags(*cmd, &flags->model);
  auto* tokens = cmd->add_option("--tokens", flags->tokens, "comma-separated token ids");
  auto* prompt = cmd->add_option("-p,--prompt", flags->prompt, "text, tokenized with the model's special tokens");
  tokens->excludes(prompt);
  cmd->add_option("--names", flags->names, "keep tensors whose names start with these (default: all)")
      ->delimiter(',');
  cmd->add_option("-o,--out", flags->out, "directory for NAME.npy and tokens.txt (created)")->required();
  cmd->callback([flags, run] {
    *run = [flags]() -> int {
      if (flags->tokens.empty() && flags->prompt.empty()) {
        return ReportError(InvalidArgumentError("dump-tensors needs --tokens or --prompt"));
      }
      auto model = LoadModelFromFlags(flags->model);
      if (!model.ok()) return ReportError(model.status());
      auto pool = MakeThreadPool(flags->model);
      if (!pool.ok()) return ReportError(pool.status());
      std::vector<int32_t> ids;
      if (!flags->tokens.empty()) {
        auto parsed = ParseTokenIds(flags->tokens);
        if (!parsed.ok()) return ReportError(parsed.status());
        ids = std::move(*parsed);
      } else {
        ids = (*model)->tokenizer().Encode(flags->prompt, /*add_special=*/true, /*parse_special=*/true);
      }
      std::error_code ec;
      std::filesystem::create_directories(flags->out, ec);
      if (ec) return ReportError(InvalidArgumentError("cannot create " + flags->out + ": " + ec.message()));
      TensorDumpOptions options;
      options.prefixes = flags->names;
      options.kv_dtype = flags->model.kv_cache_dtype;
      std::vector<std::string> written;
      Status s = DumpTensors(**model, pool->get(), ids, options, flags->out, &written);
      if (!s.ok()) return ReportError(s);
      std::printf("wrote %zu tensors for %zu tokens to %s\n", written.size(), ids.size(), flags->out.c_str());
      return 0;
    };
  });
}

}  // namespace tandem::cli
