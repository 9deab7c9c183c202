// POST /v1/completions and POST /v1/chat/completions.
#include <optional>

#include "tokenizer/tokenizer.h"
#include "server/handlers.h"

namespace tandem::server {

void HandleCompletion(ServingContext& ctx, const net::HttpRequest& request,
                      const WriterPtr& writer) {
  auto parsed = ParseCompletionRequest(request.body, ctx.tokenizer().vocab().size(),
                                       ctx.options().generation_defaults);
  if (!parsed.ok()) return SendStatus(*writer, parsed.status());
  CompletionRequest& r = *parsed;
  if (Status s = ctx.CheckModel(r.sampling.model); !s.ok()) return SendStatus(*writer, s);
  ctx.LogIgnoredFields(r.sampling.ignored_fields);
  if (Status s = ctx.CheckChoices(r.sampling); !s.ok()) return SendStatus(*writer, s);
  if (Status s = ctx.PrepareStructuredOutput(nullptr, &r.sampling); !s.ok()) return SendStatus(*writer, s);
  std::vector<int32_t> tokens = r.prompt_is_tokens
                                    ? std::move(r.prompt_tokens)
                                    : ctx.tokenizer().Encode(r.prompt_text, r.add_special_tokens,
                                                             /*parse_special=*/true);
  // The completions API's default max_tokens is 16 (OpenAI's and vLLM's).
  ctx.StartGeneration(ApiKind::kCompletion, request, r.sampling, std::move(tokens),
                      /*default_max_tokens=*/16, writer);
}

void HandleChatCompletion(ServingContext& ctx, const net::HttpRequest& request,
                          const WriterPtr& writer) {
  auto parsed = ParseChatRequest(request.body, ctx.options().generation_defaults);
  if (!parsed.ok()) return SendStatus(*writer, parsed.status());
  ChatRequest& r = *parsed;
  if (Status s = ctx.CheckModel(r.sampling.model); !s.ok()) return SendStatus(*writer, s);
  ctx.LogIgnoredFields(r.sampling.ignored_fields);
  const ServerOptions& options = ctx.options();
  if (r.tool_choice == ToolChoice::kAuto &&
      !(options.enable_auto_tool_choice && !options.tool_call_parser.empty())) {
    // vLLM's rule and message (tools without tool_choice mean "auto").
    return SendStatus(*writer, InvalidArgumentError("\"auto\" tool choice requires "
                                                    "--enable-auto-tool-choice and "
                                                    "--tool-call-parser to be set"));
  }
  if (Status s = ctx.CheckChoices(r.sampling); !s.ok()) return SendStatus(*writer, s);
  if (Status s = ctx.PrepareStructuredOutput(&r, &r.sampling); !s.ok()) return SendStatus(*writer, s);
  std::vector<std::unique_ptr<parsers::ChatOutputParser>> output_parsers;  // one per choice
  for (int i = 0; i < r.sampling.params.n; ++i) {
    auto output_parser = ctx.MakeOutputParser(r);
    if (!output_parser.ok()) return SendStatus(*writer, output_parser.status());
    if (*output_parser == nullptr) break;  // no parsing
    output_parsers.push_back(std::move(*output_parser));
  }
  ChatInputs inputs;
  inputs.messages_json = std::move(r.messages_json);
  inputs.tools_json = std::move(r.tools_json);
  inputs.tool_choice_json = std::move(r.tool_choice_json);
  inputs.chat_template_kwargs_json = std::move(r.chat_template_kwargs_json);
  inputs.add_generation_prompt = r.add_generation_prompt;
  inputs.continue_final_message = r.continue_final_message;
  inputs.add_special_tokens = r.add_special_tokens;
  auto tokens = ctx.chat().Encode(inputs);
  if (!tokens.ok()) return SendStatus(*writer, tokens.status());
  // Chat has no default max_tokens: the rest of the context, as vLLM does.
  ctx.StartGeneration(ApiKind::kChat, request, r.sampling, std::move(*tokens), std::nullopt, writer,
                      std::move(output_parsers));
}

}  // namespace tandem::server
