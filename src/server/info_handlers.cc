// POST /tokenize, POST /detokenize, GET /v1/models, GET /metrics.
#include <chrono>

#include "common/metrics.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "server/handlers.h"
#include "server/json_fields.h"

namespace tandem::server {

void HandleTokenize(ServingContext& ctx, const net::HttpRequest& request, const WriterPtr& writer) {
  auto parsed = ParseTokenizeRequest(request.body);
  if (!parsed.ok()) return SendStatus(*writer, parsed.status());
  const TokenizeRequest& r = *parsed;
  if (Status s = ctx.CheckModel(r.model); !s.ok()) return SendStatus(*writer, s);
  std::vector<int32_t> tokens;
  if (r.is_chat) {
    ChatInputs inputs;
    inputs.messages_json = r.messages_json;
    inputs.tools_json = r.tools_json;
    inputs.chat_template_kwargs_json = r.chat_template_kwargs_json;
    inputs.add_generation_prompt = r.add_generation_prompt;
    inputs.continue_final_message = r.continue_final_message;
    inputs.add_special_tokens = r.add_special_tokens;
    auto encoded = ctx.chat().Encode(inputs);
    if (!encoded.ok()) return SendStatus(*writer, encoded.status());
    tokens = std::move(*encoded);
  } else {
    tokens = ctx.tokenizer().Encode(r.prompt, r.add_special_tokens, /*parse_special=*/true);
  }
  Json body;
  body["count"] = tokens.size();
  body["max_model_len"] = ctx.options().max_model_len;
  body["tokens"] = tokens;
  if (r.return_token_strs) {
    Json strs = Json::array();
    for (int32_t id : tokens) strs.push_back(ctx.tokenizer().vocab().tokens[id]);
    body["token_strs"] = std::move(strs);
  } else {
    body["token_strs"] = nullptr;
  }
  net::SendJson(*writer, 200, DumpJson(body));
}

void HandleDetokenize(ServingContext& ctx, const net::HttpRequest& request,
                      const WriterPtr& writer) {
  auto parsed = ParseDetokenizeRequest(request.body, ctx.tokenizer().vocab().size());
  if (!parsed.ok()) return SendStatus(*writer, parsed.status());
  if (Status s = ctx.CheckModel(parsed->model); !s.ok()) return SendStatus(*writer, s);
  // vLLM decodes without skipping special tokens here.
  Json body{{"prompt", ctx.tokenizer().Decode(parsed->tokens, /*skip_special=*/false)}};
  net::SendJson(*writer, 200, DumpJson(body));
}

void HandleModels(ServingContext& ctx, const net::HttpRequest&, const WriterPtr& writer) {
  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  Json data = Json::array();
  for (const std::string& name : ctx.options().served_model_names) {
    Json permission{{"id", "modelperm-" + name},
                    {"object", "model_permission"},
                    {"created", created},
                    {"allow_create_engine", false},
                    {"allow_sampling", true},
                    {"allow_logprobs", true},
                    {"allow_search_indices", false},
                    {"allow_view", true},
                    {"allow_fine_tuning", false},
                    {"organization", "*"},
                    {"group", nullptr},
                    {"is_blocking", false}};
    data.push_back(Json{{"id", name},
                        {"object", "model"},
                        {"created", created},
                        {"owned_by", "vllm"},
                        {"root", ctx.options().model_path},
                        {"parent", nullptr},
                        {"max_model_len", ctx.options().max_model_len},
                        {"permission", Json::array({std::move(permission)})}});
  }
  net::SendJson(*writer, 200, DumpJson(Json{{"object", "list"}, {"data", std::move(data)}}));
}

void HandleMetrics(ServingContext& ctx, const net::HttpRequest&, const WriterPtr& writer) {
  std::string text;
  if (MetricsRegistry* metrics = ctx.metrics()) {
    // The engine is the gauges' one writer (vllm:num_requests_running / _waiting and
    // vllm:kv_cache_usage_perc): it publishes them after every step and every finish.
    text = metrics->RenderPrometheus();
  }
  writer->SendResponse(200, {{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}},
                       std::move(text));
}

void HandleKvTransferAbort(ServingContext& ctx, const net::HttpRequest& request, const WriterPtr& writer) {
  auto body = ParseJsonObject(request.body);
  if (!body.ok()) return SendStatus(*writer, body.status());
  auto it = body->find("remote_request_id");
  if (it == body->end() || !it->is_string() || it->get<std::string>().empty()) {
    return SendStatus(*writer, InvalidArgumentError("remote_request_id: a non-empty string is required"));
  }
  const bool aborted = ctx.engine().ReleaseKvBlocks(it->get<std::string>());
  net::SendJson(*writer, 200, DumpJson(Json{{"aborted", aborted}}));
}

void HandleResetPrefixCache(ServingContext& ctx, const net::HttpRequest&, const WriterPtr& writer) {
  ctx.engine().ResetPrefixCache();
  writer->SendResponse(200, {{"Content-Type", "text/plain"}}, "");
}

}  // namespace tandem::server
