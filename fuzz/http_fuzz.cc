// libFuzzer target: an HTTP request as a client sends it, through everything our servers do
// with it before the engine: the server's request reading (Beast's parser with our limits
// and error mapping, net/request_reader.h), header lookups, the OpenAI body parsers of
// `tandem serve` (/v1/completions, /v1/chat/completions, /tokenize, /detokenize) and its
// kv_transfer_params, the chat prompt (built-in template + tokenizer) a valid chat body
// is rendered into, and the proxy's PD body rewriting. Any input must give an answer or a Status,
// never a crash, a hang or a leak.
//
// Input: byte 0 holds flags, the rest is the request.
//   bits 0-2  socket read size: 0 = all bytes at once, k = 4^k bytes per read
//   bit 3     tight limits (256-byte headers, 1 KiB body) instead of the defaults
//   bit 4     Content-Length fix-up: the request is split at its first blank line and a
//             Content-Length matching the rest is added, so mutated bodies stay reachable
//   bit 5     the Gemma built-in chat template instead of ChatML
// The body parsers also run when the HTTP request itself is rejected (on the bytes after
// the first blank line), so they are fuzzed even by inputs the parser refuses.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"
#include "model/vocab.h"
#include "net/request_reader.h"
#include "proxy/json_span.h"
#include "proxy/pd_bodies.h"
#include "server/chat_prompt.h"
#include "server/kv_transfer_params.h"
#include "server/openai_request.h"
#include "template/builtin_chat_templates.h"

namespace {

constexpr int32_t kVocabSize = 262;  // 256 byte tokens + <unk> <s> </s> + 3 turn markers
constexpr int kMaxModelLen = 4096;

// A SentencePiece-style vocab of byte tokens plus the control tokens the built-in
// templates write, so rendered prompts tokenize without a model file.
std::unique_ptr<tandem::Tokenizer> MakeTokenizer() {
  tandem::Vocab vocab;
  vocab.model = "llama";
  vocab.pre = "default";
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab.tokens.push_back(name);
    vocab.types.push_back(tandem::TokenType::kByte);
  }
  for (const char* control :
       {"<unk>", "<s>", "</s>", "<start_of_turn>", "<end_of_turn>", "<|im_start|>"}) {
    vocab.tokens.push_back(control);
    vocab.types.push_back(tandem::TokenType::kControl);
  }
  vocab.scores.assign(vocab.tokens.size(), 0.0f);
  vocab.unk_id = 256;
  vocab.bos_id = 257;
  vocab.eos_id = 258;
  vocab.add_bos = true;
  vocab.eog_ids = {258};
  auto tokenizer = tandem::Tokenizer::Create(std::move(vocab));
  if (!tokenizer.ok()) __builtin_trap();
  return std::move(*tokenizer);
}

struct Fixtures {
  std::unique_ptr<tandem::Tokenizer> tokenizer = MakeTokenizer();
  std::unique_ptr<tandem::server::ChatPrompt> chatml = Prompt("llama");
  std::unique_ptr<tandem::server::ChatPrompt> gemma = Prompt("gemma3");

  std::unique_ptr<tandem::server::ChatPrompt> Prompt(std::string_view arch) const {
    auto builtin = tandem::BuiltinChatTemplateFor(arch);
    auto prompt = tandem::server::ChatPrompt::FromSource(std::string(builtin.source),
                                                         std::string(builtin.name), *tokenizer);
    if (!prompt.ok()) __builtin_trap();
    return std::move(*prompt);
  }
};

const Fixtures& GetFixtures() {
  static const Fixtures* fixtures = new Fixtures();
  return *fixtures;
}

void FuzzServerBodies(std::string_view body, const tandem::server::ChatPrompt& chat) {
  using namespace tandem::server;
  auto completion = ParseCompletionRequest(body, kVocabSize);
  if (completion.ok()) {
    int prompt_tokens = completion->prompt_is_tokens
                            ? static_cast<int>(completion->prompt_tokens.size())
                            : static_cast<int>(completion->prompt_text.size() / 4 + 1);
    (void)ResolveMaxTokens(prompt_tokens, kMaxModelLen, 16, &completion->sampling);
    // kv_transfer_params was parsed with the request (above); the parser on its own too:
    // the body as if it were the field's object.
    (void)ParseRequestKvTransfer(std::string(body));
  } else {
    (void)HttpStatusFor(completion.status());
  }
  auto chat_request = ParseChatRequest(body);
  if (chat_request.ok()) {
    ChatInputs inputs;
    inputs.messages_json = chat_request->messages_json;
    inputs.tools_json = chat_request->tools_json;
    inputs.tool_choice_json = chat_request->tool_choice_json;
    inputs.chat_template_kwargs_json = chat_request->chat_template_kwargs_json;
    inputs.add_generation_prompt = chat_request->add_generation_prompt;
    inputs.continue_final_message = chat_request->continue_final_message;
    inputs.add_special_tokens = chat_request->add_special_tokens;
    auto tokens = chat.Encode(inputs);
    if (tokens.ok()) {
      (void)ResolveMaxTokens(static_cast<int>(tokens->size()), kMaxModelLen, std::nullopt,
                             &chat_request->sampling);
    }
  }
  auto tokenize = ParseTokenizeRequest(body);
  if (tokenize.ok() && tokenize->is_chat) {
    ChatInputs inputs;
    inputs.messages_json = tokenize->messages_json;
    inputs.tools_json = tokenize->tools_json;
    inputs.chat_template_kwargs_json = tokenize->chat_template_kwargs_json;
    inputs.add_generation_prompt = tokenize->add_generation_prompt;
    inputs.continue_final_message = tokenize->continue_final_message;
    (void)chat.Render(inputs);
  }
  (void)ParseDetokenizeRequest(body, kVocabSize);
}

void FuzzProxyBodies(std::string_view body) {
  using namespace tandem::proxy;
  auto client = ParseClientBody(body);
  if (!client.ok()) return;
  (void)PrefillBody(*client);
  (void)DecodeBody(body, *client, R"({"remote_host":"127.0.0.1","remote_port":1})");
  (void)EstimatePromptTokens(*client);
  (void)MaxNewTokens(*client, 16);
  const bool chat = client->contains("messages");
  (void)ContinuationBody(*client, chat, "generated text", 3);
  (void)JsonValueText(body, {"kv_transfer_params", "remote_host"});
  (void)JsonIntAt(body, {"max_tokens"});
  std::string copy(body);
  (void)ReplaceCachedTokens(&copy, 7);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem::net;
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  const Fixtures& fixtures = GetFixtures();

  HttpServerOptions options;
  options.max_body_bytes = 256u << 10;  // below the default, for speed; same code path
  if (flags & 8) {
    options.max_header_bytes = 256;
    options.max_body_bytes = 1024;
  }
  const size_t chunk_bytes = (flags & 7) == 0 ? 0 : size_t{1} << (2 * (flags & 7));

  size_t blank = input.find("\r\n\r\n");
  std::string_view after_blank =
      blank == std::string_view::npos ? std::string_view() : input.substr(blank + 4);
  std::string request_bytes(input);
  if ((flags & 16) && blank != std::string_view::npos) {
    request_bytes = std::string(input.substr(0, blank)) +
                    "\r\nContent-Length: " + std::to_string(after_blank.size()) + "\r\n\r\n" +
                    std::string(after_blank);
  }

  internal::BytesRead read = internal::ReadRequestFromBytes(request_bytes, options, chunk_bytes);
  std::string_view body = after_blank;
  if (read.ok) {
    const HttpRequest& request = read.request;
    (void)request.path();
    (void)request.query();
    (void)request.headers.Get("Authorization");
    (void)request.headers.GetOr("X-Request-Id", "");
    if (read.consumed > request_bytes.size()) __builtin_trap();
    if (request.body.size() > options.max_body_bytes) __builtin_trap();
    body = request.body;
  } else if (read.failure.status != 0 && read.failure.message.empty()) {
    __builtin_trap();  // every answered failure explains itself
  }
  const auto& chat = (flags & 32) ? *fixtures.gemma : *fixtures.chatml;
  FuzzServerBodies(body, chat);
  FuzzProxyBodies(body);
  return 0;
}
