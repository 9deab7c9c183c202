"""Tool calls and reasoning in /v1/chat/completions, end to end: `tandem serve` on the qwen3
fixture with --scripted-output-file (TEST ONLY: every request generates the file's text), so
the parsers see exact model output; the real `openai` client reads the results, streamed
and not, and both must agree."""
import json

import pytest

from test_serve import Server

GLM_FLAGS = ["--enable-auto-tool-choice", "--tool-call-parser", "glm47", "--reasoning-parser", "glm45"]
HERMES_FLAGS = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "glm45"]

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather forecast",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "zip": {"type": "string"}, "days": {"type": "integer"},
            "metric": {"type": "boolean"}, "hours": {"type": "array"}, "where": {"type": "object"}}}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture
def serve(tandem_bin, fixture_dir, tmp_path):
    """serve(script, flags) -> a running server whose every reply is `script`."""
    servers = []

    def start(script, flags=GLM_FLAGS, model="qwen3.gguf", max_len="512"):
        path = tmp_path / f"script{len(servers)}.txt"
        path.write_text(script)
        server = Server(tandem_bin, fixture_dir / model,
                        ["--served-model-name", "fx", "--max-model-len", max_len, *flags,
                         "--scripted-output-file", str(path)], tmp_path, f"tools{len(servers)}")
        servers.append(server)
        return server

    yield start
    for server in servers:
        assert server.stop() == 0


def chat(server, **kw):
    """Non-streamed and streamed results of one request: (message, finish_reason) each, the
    streamed message folded from its deltas the way a client does."""
    body = dict(model="fx", messages=MESSAGES, temperature=0, **kw)
    r = server.client().chat.completions.create(**body)
    choice = r.choices[0]
    whole = {
        "content": choice.message.content,
        "reasoning_content": getattr(choice.message, "reasoning_content", None),
        "tool_calls": [{"id": c.id, "type": c.type, "name": c.function.name, "arguments": c.function.arguments}
                       for c in choice.message.tool_calls or []],
    }
    content, reasoning, calls, finish, roles = "", "", {}, None, []
    for chunk in server.client().chat.completions.create(stream=True, **body):
        assert len(chunk.choices) == 1
        c = chunk.choices[0]
        if c.delta.role:
            roles.append(c.delta.role)
        content += c.delta.content or ""
        reasoning += getattr(c.delta, "reasoning_content", None) or ""
        for call in c.delta.tool_calls or []:
            slot = calls.setdefault(call.index, {"id": None, "type": None, "name": "", "arguments": ""})
            if call.id:
                assert slot["id"] is None, "the id is sent once"
                slot["id"] = call.id
            if call.type:
                slot["type"] = call.type
            if call.function and call.function.name:
                assert slot["name"] == "", "the name is sent once"
                slot["name"] = call.function.name
            if call.function and call.function.arguments:
                slot["arguments"] += call.function.arguments
        if c.finish_reason is not None:
            assert finish is None, "one finish_reason"
            finish = c.finish_reason
    assert roles == ["assistant"]
    streamed = {"content": content or None, "reasoning_content": reasoning or None,
                "tool_calls": [calls[i] for i in sorted(calls)]}
    assert sorted(calls) == list(range(len(calls)))
    return (whole, choice.finish_reason), (streamed, finish)


def calls_of(message):
    """[(name, arguments as a dict)] with ids checked."""
    for c in message["tool_calls"]:
        assert c["id"].startswith("call") and c["type"] == "function"
    return [(c["name"], json.loads(c["arguments"])) for c in message["tool_calls"]]


def check_same(result):
    """The streamed reply equals the non-streamed one (ids aside); returns the latter."""
    (whole, finish), (streamed, stream_finish) = result
    assert finish == stream_finish
    assert whole["content"] == streamed["content"]
    assert whole["reasoning_content"] == streamed["reasoning_content"]
    assert calls_of(whole) == calls_of(streamed)
    for c in whole["tool_calls"]:  # vLLM's shape: arguments are a JSON object text
        assert c["arguments"].startswith("{") and c["arguments"].endswith("}")
    return whole, finish


def test_glm_parsers_on_a_checkpoint_directorys_own_template(serve):
    """A GLM-4.5 Hugging Face directory: the chat template comes from its
    tokenizer_config.json (tools rendered by it), and glm45 reasoning + glm47 tool calls
    parse the reply."""
    server = serve("<think>Paris is in France.</think><tool_call>get_weather<arg_key>city</arg_key>"
                   "<arg_value>Paris</arg_value></tool_call>", model="hf/glm4moe", max_len="1024")
    assert "chat template: the model's own (tokenizer.chat_template)" in server.log()
    message, finish = check_same(chat(server, tools=TOOLS))
    assert finish == "tool_calls"
    assert message["reasoning_content"] == "Paris is in France."
    assert calls_of(message) == [("get_weather", {"city": "Paris"})]


def test_several_calls_in_one_reply(serve):
    server = serve("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>\n"
                   "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Berlin</arg_value>"
                   "<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>")
    message, finish = check_same(chat(server, tools=TOOLS))
    assert finish == "tool_calls"
    assert message["content"] is None and message["reasoning_content"] is None
    assert calls_of(message) == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Berlin", "days": 3})]
    assert message["tool_calls"][0]["id"] != message["tool_calls"][1]["id"]
    assert message["tool_calls"][0]["arguments"] == '{"city": "Paris"}'


def test_call_without_arguments(serve):
    server = serve("<tool_call>get_time</tool_call>")
    message, finish = check_same(chat(server, tools=TOOLS))
    assert finish == "tool_calls" and message["content"] is None
    assert calls_of(message) == [("get_time", {})]
    assert message["tool_calls"][0]["arguments"] == "{}"


def test_arguments_typed_by_the_schema(serve):
    server = serve("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
                   "<arg_key>zip</arg_key><arg_value>75001</arg_value>"
                   "<arg_key>days</arg_key><arg_value>3</arg_value>"
                   "<arg_key>metric</arg_key><arg_value>true</arg_value>"
                   "<arg_key>hours</arg_key><arg_value>[6, 12]</arg_value>"
                   "<arg_key>where</arg_key><arg_value>{\"lat\": 48.8}</arg_value></tool_call>")
    message, finish = check_same(chat(server, tools=TOOLS))
    assert finish == "tool_calls"
    assert calls_of(message) == [("get_weather", {"city": "Paris", "zip": "75001", "days": 3, "metric": True,
                                                  "hours": [6, 12], "where": {"lat": 48.8}})]


def test_text_before_a_call(serve):
    server = serve("Let me check the weather.\n<tool_call>get_weather<arg_key>city</arg_key>"
                   "<arg_value>Paris</arg_value></tool_call>")
    message, finish = check_same(chat(server, tools=TOOLS))
    assert finish == "tool_calls"
    assert message["content"] == "Let me check the weather.\n"
    assert calls_of(message) == [("get_weather", {"city": "Paris"})]


def test_reasoning_then_call(serve):
    server = serve("<think>The user wants the weather in Paris.</think>"
                   "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>")
    message, finish = check_same(chat(server, tools=TOOLS))
    assert finish == "tool_calls"
    assert message["reasoning_content"] == "The user wants the weather in Paris."
    assert message["content"] is None
    assert calls_of(message) == [("get_weather", {"city": "Paris"})]

    # Without tools the same reply is reasoning + raw content (no tool parsing) ...
    message, finish = check_same(chat(server))
    assert finish == "stop" and message["tool_calls"] == []
    assert message["reasoning_content"] == "The user wants the weather in Paris."
    assert message["content"] == "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
    # ... and so with tool_choice "none".
    message, finish = check_same(chat(server, tools=TOOLS, tool_choice="none"))
    assert finish == "stop" and message["tool_calls"] == []
    assert message["content"].startswith("<tool_call>get_weather")


def test_enable_thinking_false(serve):
    server = serve("<think>Plan.</think>Sunny in Paris.")
    message, finish = check_same(chat(server, extra_body={"chat_template_kwargs": {"enable_thinking": False}}))
    assert finish == "stop"
    assert message["reasoning_content"] is None
    assert message["content"] == "<think>Plan.</think>Sunny in Paris."
    message, finish = check_same(chat(server))
    assert message["reasoning_content"] == "Plan." and message["content"] == "Sunny in Paris."


def test_unterminated_markup_cut_by_max_tokens(serve):
    script = ("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
              "<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>")
    server = serve(script)
    tokens = server.post("/tokenize", {"model": "fx", "prompt": script, "add_special_tokens": False}).json()["tokens"]

    def text_of(n):
        return server.post("/detokenize", {"model": "fx", "tokens": tokens[:n]}).json()["prompt"]

    assert text_of(len(tokens)) == script
    # Cut inside the second value: the first pair is complete, the second is not.
    cut = next(n for n in range(len(tokens)) if "<arg_value>3" in text_of(n))
    assert not text_of(cut).endswith("</arg_value>")
    message, finish = check_same(chat(server, tools=TOOLS, max_tokens=cut))
    assert finish == "length"
    assert message["content"] is None
    assert calls_of(message) == [("get_weather", {"city": "Paris"})]
    # Cut inside the name: not a call yet, so the text stays content.
    cut = next(n for n in range(len(tokens)) if text_of(n).startswith("<tool_call>get"))
    assert text_of(cut) != "<tool_call>get_weather"
    message, finish = check_same(chat(server, tools=TOOLS, max_tokens=cut))
    assert finish == "length" and message["tool_calls"] == []
    assert message["content"] == text_of(cut)


def test_tool_choice_required_and_named_are_read_as_hermes(serve):
    # "required" and a named function force the call with a grammar in the hermes markup
    # (tests/test_structured_outputs.py), so their replies are read by the hermes parser
    # whatever --tool-call-parser says (glm47 here). The scripted reply skips the grammar.
    server = serve('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>')
    for choice in ["required", {"type": "function", "function": {"name": "get_time"}}]:
        message, finish = check_same(chat(server, tools=TOOLS, tool_choice=choice))
        assert finish == "tool_calls" and calls_of(message) == [("get_time", {})]
    r = server.post("/v1/chat/completions", {"model": "fx", "messages": MESSAGES, "tools": TOOLS,
                                             "tool_choice": {"type": "function", "function": {"name": "nope"}}})
    assert r.status_code == 400 and "does not match any of the specified `tools`" in r.json()["error"]["message"]


def test_tool_history_renders(serve):
    server = serve("Sunny.")
    history = MESSAGES + [
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
    ]
    r = server.client().chat.completions.create(model="fx", messages=history, tools=TOOLS, temperature=0)
    assert r.choices[0].message.content == "Sunny." and r.choices[0].finish_reason == "stop"


def test_hermes(serve):
    server = serve('Checking.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n'
                   '</tool_call><tool_call>{"name": "get_time", "arguments": {}}</tool_call>', HERMES_FLAGS)
    message, finish = check_same(chat(server, tools=TOOLS))
    assert finish == "tool_calls" and message["content"] == "Checking."
    assert calls_of(message) == [("get_weather", {"city": "Paris", "days": 2}), ("get_time", {})]


def test_auto_tool_choice_needs_the_flag(serve):
    server = serve("Hello.", ["--reasoning-parser", "glm45"])
    r = server.post("/v1/chat/completions", {"model": "fx", "messages": MESSAGES, "tools": TOOLS})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == \
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    message, finish = check_same(chat(server))
    assert message["content"] == "Hello." and finish == "stop"
