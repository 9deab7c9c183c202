#include "grammar/tool_call_grammar.h"

#include <nlohmann/json.hpp>

#include "grammar/json_schema_compiler.h"

namespace tandem::grammar {

StatusOr<Grammar> CompileToolCallGrammar(std::string_view spec_json) {
  using Json = nlohmann::ordered_json;
  Json spec = Json::parse(spec_json, nullptr, /*allow_exceptions=*/false);
  if (!spec.is_object() || !spec.contains("tools") || !spec["tools"].is_array()) {
    return InvalidArgumentError("tools: Input should be a valid list");
  }
  const std::string only = spec.contains("name") && spec["name"].is_string() ? spec["name"].get<std::string>() : "";
  GrammarBuilder b;
  std::vector<Expr> calls;
  int index = 0;
  for (const Json& tool : spec["tools"]) {
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object()) continue;
    const Json& f = tool["function"];
    if (!f.contains("name") || !f["name"].is_string()) continue;
    const std::string name = f["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    std::string params = "{\"type\": \"object\"}";
    if (f.contains("parameters") && !f["parameters"].is_null()) params = f["parameters"].dump();
    StatusOr<int> args = AddJsonSchemaRules(params, "t" + std::to_string(index++) + "-", b);
    if (!args.ok()) return InvalidArgumentError("the parameters of tool '" + name + "': " + args.status().message());
    calls.push_back(Expr::Seq({Expr::Lit("<tool_call>\n{\"name\": " + Json(name).dump() + ", \"arguments\": "),
                               Expr::Ref(*args), Expr::Lit("}\n</tool_call>")}));
  }
  if (calls.empty()) return InvalidArgumentError("tool_choice: no tool to call");
  const int call = b.Declare("call");
  b.Define(call, Expr::Alt(std::move(calls)));
  const bool single = !only.empty() || (spec.contains("single") && spec["single"] == true);
  Expr root = !single ? Expr::Seq({Expr::Ref(call), Expr::Star(Expr::Seq({Expr::Lit("\n"), Expr::Ref(call)}))})
                           : Expr::Ref(call);
  b.Define(b.Declare("root"), std::move(root));
  return std::move(b).Build("root");
}

}  // namespace tandem::grammar
