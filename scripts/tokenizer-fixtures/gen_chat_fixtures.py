#!/usr/bin/env python3
"""Generate chat-template fixtures for pkg/chat with jinja2.

usage: python3 gen_chat_fixtures.py QWEN3_DIR OUT_DIR

Renders the chat_template from QWEN3_DIR/tokenizer_config.json (written by
dump_qwen3.mjs) the way transformers' apply_chat_template does: an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the
loopcontrols extension, a raise_exception global and a tojson filter that is
json.dumps(ensure_ascii=False). Writes OUT_DIR/qwen3_chat_template.jinja and
OUT_DIR/qwen3_chat.jsonl with one object per line:
  {"name", "messages", "tools", "add_generation_prompt", "enable_thinking", "text"}
enable_thinking is null when the variable is not passed at all.
"""

import json
import os
import sys

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def U(c):
    return {"role": "user", "content": c}


def A(c, **kw):
    m = {"role": "assistant", "content": c}
    m.update(kw)
    return m


def S(c):
    return {"role": "system", "content": c}


def T(c):
    return {"role": "tool", "content": c}


def call(name, args):
    return {"type": "function", "function": {"name": name, "arguments": args}}


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city — «quoted» \"text\"\nsecond line",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "城市"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
CALC = {"type": "function", "function": {"name": "calc", "parameters": {"type": "object", "properties": {}}}}

CASES = [
    ("user only", [U("Hello!")], None, False, None),
    ("user gen", [U("Hello!")], None, True, None),
    ("system user gen", [S("You are a helpful assistant."), U("What is 2+2?")], None, True, None),
    ("thinking off", [S("Be brief."), U("What is 2+2?")], None, True, False),
    ("thinking on explicit", [U("What is 2+2?")], None, True, True),
    ("thinking off no gen prompt", [U("hi")], None, False, False),
    ("multi turn", [S("sys"), U("one"), A("first answer"), U("two")], None, True, None),
    ("history think stripped", [U("q1"), A("<think>\nplan\n</think>\n\nanswer one"), U("q2")], None, True, False),
    ("last assistant think kept", [U("q1"), A("<think>\nplan it\n</think>\n\nthe answer")], None, False, None),
    ("last assistant no think", [U("q1"), A("plain answer")], None, False, None),
    ("reasoning_content field", [U("q"), A("final", reasoning_content="\nsteps\n\n")], None, False, None),
    ("reasoning_content empty", [U("q"), A("<think>x</think>y", reasoning_content=""), A("z")], None, False, None),
    ("think newlines", [U("q"), A("\n\n<think>\n\n a \n\n</think>\n\n\n b \n")], None, False, None),
    ("two think blocks", [U("q"), A("<think>r1</think>mid<think>r2</think>end")], None, True, None),
    ("think only close tag", [U("q"), A("reason without open\n</think>\nanswer")], None, False, None),
    ("mid conversation system", [U("a"), S("late system"), U("b")], None, True, None),
    ("unicode and empty", [S(""), U("你好 🌍 \u00a0 مرحبا"), A(""), U("")], None, True, None),
    ("assistant after last query not last", [U("q"), A("<think>r</think>a1"), A("a2")], None, True, None),
    ("tools no system", [U("Weather in Paris?")], [WEATHER, CALC], True, None),
    ("tools with system", [S("You are a bot."), U("Weather?")], [WEATHER], True, False),
    (
        "tool calls flow",
        [
            S("sys"),
            U("Weather in Paris and Rome?"),
            A("", tool_calls=[call("get_weather", {"city": "Paris", "days": 2}), call("get_weather", '{"city": "Rome"}')]),
            T('{"temp": 21}'),
            T("sunny, 25°C"),
            A("<think>\ncombine\n</think>\n\nParis 21, Rome 25."),
            U("thanks"),
        ],
        [WEATHER],
        True,
        None,
    ),
    (
        "tool call with content after query",
        [
            U("calc 1+1"),
            A("<think>need calc</think>\nLet me compute.", tool_calls=[call("calc", {"expr": "1+1", "nested": {"a": [1, 2.5, True, None]}})]),
            T("2"),
        ],
        [CALC],
        True,
        None,
    ),
    (
        "user wrapped tool response",
        [U("real question"), A("<think>t</think>calling", tool_calls=[call("calc", "{}")]), U("<tool_response>\n42\n</tool_response>")],
        None,
        True,
        None,
    ),
    ("tool first", [T("orphan"), U("q")], None, True, None),
]


def main():
    if len(sys.argv) != 3:
        print("usage: gen_chat_fixtures.py QWEN3_DIR OUT_DIR", file=sys.stderr)
        sys.exit(2)
    qdir, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(qdir, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    src = cfg["chat_template"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "qwen3_chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(src)
    tmpl = environment().from_string(src)
    with open(os.path.join(out, "qwen3_chat.jsonl"), "w", encoding="utf-8") as f:
        for name, msgs, tools, gen, think in CASES:
            kwargs = {}
            if think is not None:
                kwargs["enable_thinking"] = think
            text = tmpl.render(messages=msgs, tools=tools, documents=None, add_generation_prompt=gen, **kwargs)
            f.write(json.dumps({
                "name": name,
                "messages": msgs,
                "tools": tools,
                "add_generation_prompt": gen,
                "enable_thinking": think,
                "text": text,
            }, ensure_ascii=False) + "\n")
    print(f"wrote {out}/qwen3_chat.jsonl ({len(CASES)} cases)", file=sys.stderr)


if __name__ == "__main__":
    main()
