#include "tokenizer/hf_regex.h"

#include <oniguruma.h>

#include <mutex>
#include <string>

#include "tokenizer/unicode.h"

namespace tandem {
namespace {

// Oniguruma's own documentation asks that regexes not be created or freed from several
// threads at once, and that onig_initialize run once before the first onig_new.
std::mutex& OnigMutex() {
  static std::mutex mutex;
  return mutex;
}

void InitializeOnce() {
  static const bool initialized = [] {
    OnigEncoding encodings[1] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
    return true;
  }();
  (void)initialized;
}

}  // namespace

StatusOr<std::unique_ptr<HfRegex>> HfRegex::Compile(std::string_view pattern) {
  std::lock_guard<std::mutex> lock(OnigMutex());
  InitializeOnce();
  OnigRegex regex = nullptr;
  OnigErrorInfo info;
  const auto* begin = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int rc = onig_new(&regex, begin, begin + pattern.size(), ONIG_OPTION_NONE,
                          ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, rc, &info);
    return InvalidArgumentError("bad regex: " + std::string(reinterpret_cast<char*>(message)));
  }
  return std::unique_ptr<HfRegex>(new HfRegex(regex));
}

HfRegex::~HfRegex() {
  std::lock_guard<std::mutex> lock(OnigMutex());
  onig_free(static_cast<OnigRegex>(regex_));
}

std::vector<std::pair<size_t, size_t>> HfRegex::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  OnigRegion* region = onig_region_new();
  OnigMatchParam* param = onig_new_match_param();
  onig_initialize_match_param(param);
  onig_set_retry_limit_in_match_of_match_param(param, kRetryLimit);
  onig_set_retry_limit_in_search_of_match_param(param, kRetryLimit);

  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = str + text.size();
  size_t pos = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (pos <= text.size()) {
    onig_region_clear(region);
    const int rc = onig_search_with_param(static_cast<OnigRegex>(regex_), str, end, str + pos, end,
                                          region, ONIG_OPTION_NONE, param);
    if (rc < 0) break;  // no further match, or the retry limit
    const size_t begin = static_cast<size_t>(region->beg[0]);
    const size_t finish = static_cast<size_t>(region->end[0]);
    if (begin == finish && have_last && finish == last_end) {
      if (pos >= text.size()) break;
      pos +=
          std::min(unicode::Utf8SequenceLength(static_cast<uint8_t>(text[pos])), text.size() - pos);
      continue;
    }
    matches.emplace_back(begin, finish);
    pos = finish;
    last_end = finish;
    have_last = true;
  }
  onig_free_match_param(param);
  onig_region_free(region, 1);
  return matches;
}

}  // namespace tandem
