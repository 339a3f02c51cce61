"""Have the official Python SDKs parse every shape a pikuri FakeServer serves.

Run by tests/integration/sdk.rs (through scripts/sdk-check.sh test) as
`python scripts/sdk_check.py http://127.0.0.1:PORT`. The server answers each
request by the `case:NAME` word in its last user message (see the test for
the scripted replies). Every body and every SSE event is validated against
the SDK's own pydantic types (a missing required field or a wrong literal
fails), then parsed again through the SDK's client and stream helpers.

Prints `ok NAME` per check; exits 1 on the first failure.
"""

import json
import sys

import anthropic
import urllib.request
import openai
from anthropic.types import Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

ROOT = sys.argv[1]
MODEL = "fake-model"
oa = openai.OpenAI(base_url=ROOT + "/v1", api_key="k", max_retries=0)
an = anthropic.Anthropic(base_url=ROOT, api_key="k", max_retries=0)
CHUNK = TypeAdapter(ChatCompletionChunk)
ANTHROPIC_EVENT = TypeAdapter(RawMessageStreamEvent)
RESPONSES_EVENT = TypeAdapter(ResponseStreamEvent)


def ok(name):
    print("ok", name, flush=True)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def sse(path, body):
    """POST `body` and return the SSE events as (event name, data text)."""
    events = []
    req = urllib.request.Request(ROOT + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        expect(r.status == 200, f"{path}: status {r.status}")
        expect(r.headers["content-type"].startswith("text/event-stream"), "content type")
        name, data = None, []
        for raw in r:
            line = raw.decode().rstrip("\r\n")
            if line == "":
                if data:
                    events.append((name, "\n".join(data)))
                name, data = None, []
            elif line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
    return events


# ---- chat completions -------------------------------------------------------

def chat_body(case, **extra):
    return {"model": MODEL, "messages": [{"role": "user", "content": "case:" + case}], **extra}


def chat_plain():
    raw = oa.chat.completions.with_raw_response.create(**chat_body("text"))
    ChatCompletion.model_validate_json(raw.http_response.text)
    c = raw.parse()
    expect(c.choices[0].message.content == "Hello from the fake!", c)
    expect(c.choices[0].finish_reason == "stop", c)
    expect(c.usage.prompt_tokens == 100 and c.usage.completion_tokens == 7, c.usage)
    expect(c.usage.prompt_tokens_details.cached_tokens == 60, c.usage)
    ok("chat plain + usage")


def chat_stream():
    body = chat_body("text", stream=True, stream_options={"include_usage": True})
    events = sse("/v1/chat/completions", body)
    expect(events[-1][1] == "[DONE]", "no [DONE]")
    for _, data in events[:-1]:
        CHUNK.validate_json(data)
    with oa.chat.completions.stream(**chat_body("text", stream_options={"include_usage": True})) as s:
        final = s.get_final_completion()
    expect(final.choices[0].message.content == "Hello from the fake!", final)
    expect(final.usage.prompt_tokens_details.cached_tokens == 60, final.usage)
    ok("chat stream + usage")


def chat_tools():
    raw = oa.chat.completions.with_raw_response.create(**chat_body("tools"))
    ChatCompletion.model_validate_json(raw.http_response.text)
    c = raw.parse()
    calls = c.choices[0].message.tool_calls
    expect([t.function.name for t in calls] == ["get_weather", "get_time"], calls)
    expect(json.loads(calls[0].function.arguments) == {"city": "Oslo"}, calls)
    expect(c.choices[0].finish_reason == "tool_calls", c)
    for _, data in sse("/v1/chat/completions", chat_body("tools", stream=True))[:-1]:
        CHUNK.validate_json(data)
    with oa.chat.completions.stream(**chat_body("tools")) as s:
        final = s.get_final_completion()
    calls = final.choices[0].message.tool_calls
    expect([t.function.name for t in calls] == ["get_weather", "get_time"], calls)
    expect(json.loads(calls[1].function.arguments) == {"tz": "CET"}, calls)
    ok("chat parallel tool calls, plain and stream")


def chat_errors():
    try:
        oa.chat.completions.create(**chat_body("error"))
        raise AssertionError("no error raised")
    except openai.RateLimitError as e:
        expect(e.status_code == 429 and "slow down" in str(e), e)
    try:
        for _ in oa.chat.completions.create(**chat_body("midstream", stream=True)):
            pass
        raise AssertionError("no mid-stream error raised")
    except openai.APIError as e:
        expect("boom" in str(e), e)
    ok("chat errors: 429, mid-stream")


# ---- Anthropic Messages -----------------------------------------------------

def an_body(case, **extra):
    return {"model": MODEL, "max_tokens": 256,
            "messages": [{"role": "user", "content": "case:" + case}], **extra}


def anthropic_plain():
    raw = an.messages.with_raw_response.create(**an_body("text"))
    Message.model_validate_json(raw.http_response.text)
    m = raw.parse()
    expect(m.content[0].type == "text" and m.content[0].text == "Hello from the fake!", m)
    expect(m.stop_reason == "end_turn", m)
    u = m.usage
    expect((u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens,
            u.output_tokens) == (10, 60, 30, 7), u)
    ok("anthropic plain + cache usage")


def anthropic_stream(case):
    events = sse("/v1/messages", an_body(case, stream=True))
    for name, data in events:
        # `ping` is no stream event type of the SDK: its client skips it.
        if name == "ping":
            expect(json.loads(data) == {"type": "ping"}, data)
            continue
        ev = ANTHROPIC_EVENT.validate_json(data)
        expect(ev.type == name, f"event {name} carries type {ev.type}")
    names = [n for n, _ in events]
    expect(names[0] == "message_start" and names[-1] == "message_stop", names)
    with an.messages.stream(**an_body(case)) as s:
        return s.get_final_message()


def anthropic_streams():
    m = anthropic_stream("text")
    expect(m.content[0].text == "Hello from the fake!", m)
    expect(m.usage.cache_read_input_tokens == 60 and m.usage.output_tokens == 7, m.usage)
    ok("anthropic stream + cache usage")
    m = anthropic_stream("tools")
    uses = [b for b in m.content if b.type == "tool_use"]
    expect([(b.name, b.input) for b in uses]
           == [("get_weather", {"city": "Oslo"}), ("get_time", {"tz": "CET"})], m.content)
    expect(m.stop_reason == "tool_use", m)
    raw = an.messages.with_raw_response.create(**an_body("tools"))
    Message.model_validate_json(raw.http_response.text)
    expect(raw.parse().content[0].input == {"city": "Oslo"}, raw.http_response.text)
    ok("anthropic parallel tool_use, plain and stream")
    for final in (anthropic_stream("think_tools"),
                  an.messages.create(**an_body("think_tools"))):
        expect(final.content[0].type == "thinking", final.content)
        expect(final.content[0].thinking == "Six times seven.", final.content)
        expect(final.content[0].signature.startswith("fakesig-"), final.content)
        expect(final.content[1].type == "tool_use", final.content)
    ok("anthropic thinking with signature, plain and stream")
    for final in (anthropic_stream("redacted"), an.messages.create(**an_body("redacted"))):
        expect([b.type for b in final.content] == ["redacted_thinking", "thinking", "text"],
               final.content)
        expect(final.content[0].data == "opaque-data", final.content)
    count = an.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    expect(count.input_tokens > 0, count)
    ok("anthropic redacted_thinking, count_tokens")


def anthropic_errors():
    try:
        an.messages.create(**an_body("overloaded"))
        raise AssertionError("no error raised")
    except anthropic.APIStatusError as e:
        expect(e.status_code == 529, e)
        expect(e.body["error"]["type"] == "overloaded_error", e.body)
    try:
        an.messages.create(**an_body("error"))
        raise AssertionError("no error raised")
    except anthropic.RateLimitError as e:
        expect(e.body["error"]["message"] == "slow down", e.body)
    try:
        with an.messages.stream(**an_body("midstream")) as s:
            s.get_final_message()
        raise AssertionError("no mid-stream error raised")
    except anthropic.APIStatusError as e:
        expect("boom" in str(e), e)
    ok("anthropic errors: 529, 429, mid-stream")


# ---- OpenAI Responses -------------------------------------------------------

def rs_body(case, **extra):
    return {"model": MODEL, "input": [{"role": "user", "content": "case:" + case}], **extra}


def responses_stream(case):
    events = sse("/v1/responses", rs_body(case, stream=True))
    seqs = []
    for name, data in events:
        ev = RESPONSES_EVENT.validate_json(data)
        expect(ev.type == name, f"event {name} carries type {ev.type}")
        seqs.append(ev.sequence_number)
    expect(seqs == list(range(len(seqs))), seqs)
    with oa.responses.stream(**rs_body(case)) as s:
        return s.get_final_response()


def responses_all():
    raw = oa.responses.with_raw_response.create(**rs_body("text"))
    Response.model_validate_json(raw.http_response.text)
    r = raw.parse()
    expect(r.output_text == "Hello from the fake!", r)
    u = r.usage
    expect((u.input_tokens, u.input_tokens_details.cached_tokens,
            u.input_tokens_details.cache_write_tokens, u.output_tokens) == (100, 60, 30, 7), u)
    ok("responses plain + cache usage")
    r = responses_stream("text")
    expect(r.output_text == "Hello from the fake!" and r.usage.output_tokens == 7, r)
    ok("responses stream + usage")
    for r in (responses_stream("tools"), oa.responses.create(**rs_body("tools"))):
        calls = [o for o in r.output if o.type == "function_call"]
        expect([(c.name, json.loads(c.arguments)) for c in calls]
               == [("get_weather", {"city": "Oslo"}), ("get_time", {"tz": "CET"})], r.output)
        expect(calls[0].call_id != calls[1].call_id, calls)
    ok("responses function calls, plain and stream")
    for r in (responses_stream("think_tools"), oa.responses.create(**rs_body("think_tools"))):
        item = r.output[0]
        expect(item.type == "reasoning", r.output)
        expect(item.summary[0].text == "Six times seven.", item)
        expect(item.encrypted_content.startswith("fakesig-"), item)
        expect(r.usage.output_tokens_details.reasoning_tokens > 0, r.usage)
    ok("responses reasoning with encrypted_content, plain and stream")
    for r in (responses_stream("redacted"), oa.responses.create(**rs_body("redacted"))):
        expect([o.type for o in r.output] == ["reasoning", "reasoning", "message"], r.output)
        expect(r.output[0].summary == [] and r.output[0].encrypted_content == "opaque-data",
               r.output)
    ok("responses reasoning item without summary")
    r = oa.responses.create(**rs_body("length"))
    expect(r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens", r)
    ok("responses incomplete (length)")
    try:
        oa.responses.create(**rs_body("error"))
        raise AssertionError("no error raised")
    except openai.RateLimitError as e:
        expect(e.status_code == 429, e)
    events = sse("/v1/responses", rs_body("midstream", stream=True))
    for _, data in events:
        RESPONSES_EVENT.validate_json(data)
    expect([n for n, _ in events][-2:] == ["error", "response.failed"], events)
    with oa.responses.stream(**rs_body("midstream")) as s:
        kinds = [e.type for e in s]
    expect(kinds[-2:] == ["error", "response.failed"], kinds)
    ok("responses errors: 429, mid-stream error + response.failed")


def main():
    for check in (chat_plain, chat_stream, chat_tools, chat_errors,
                  anthropic_plain, anthropic_streams, anthropic_errors, responses_all):
        check()
    print("all SDK checks passed", flush=True)


if __name__ == "__main__":
    main()
