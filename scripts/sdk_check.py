"""Have the official Python SDKs parse every shape a pikuri FakeServer serves.

The SDKs: `openai` (chat completions, Responses), `anthropic` (Messages) and
`google-genai` (Gemini's generateContent, streamGenerateContent and
cachedContents).

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
import urllib.error
import urllib.request
import openai
from anthropic.types import Message, RawMessageStreamEvent
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as gtypes
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
# The SDK's types forbid unknown fields: a misspelled or invented field of a
# served body fails their validation.
gm = genai.Client(api_key="k", http_options=gtypes.HttpOptions(
    base_url=ROOT, api_version="v1beta",
    retry_options=gtypes.HttpRetryOptions(attempts=1)))
GEMINI = "/v1beta/models/" + MODEL


def ok(name):
    print("ok", name, flush=True)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def post(path, body, method="POST"):
    """Send `body` as JSON and return (status, parsed JSON answer)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(ROOT + path, data=data, method=method,
                                 headers={"content-type": "application/json",
                                          "x-goog-api-key": "k"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
            return r.status, (json.loads(text) if text else {})
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode())


def sse(path, body):
    """POST `body` and return the SSE events as (event name, data text)."""
    events = []
    req = urllib.request.Request(ROOT + path, data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json",
                                          "x-goog-api-key": "k"})
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


# ---- Gemini ------------------------------------------------------------------

def gm_contents(case):
    return [{"role": "user", "parts": [{"text": "case:" + case}]}]


def gm_raw(case, **extra):
    """The plain answer's raw body, validated by the SDK's own type."""
    status, body = post(GEMINI + ":generateContent", {"contents": gm_contents(case), **extra})
    expect(status == 200, f"{case}: status {status}: {body}")
    # JSON mode, as the stream's events: bytes fields (thought signatures)
    # must be base64 there.
    return gtypes.GenerateContentResponse.model_validate_json(json.dumps(body))


def gm_stream_raw(case):
    """The streamed answer's events, each validated by the SDK's own type."""
    events = sse(GEMINI + ":streamGenerateContent?alt=sse", {"contents": gm_contents(case)})
    expect(events, f"{case}: no events")
    return [gtypes.GenerateContentResponse.model_validate_json(d) for _, d in events]


def gm_both(case, **config):
    """The answer through the SDK's client, plain and streamed (the chunks
    joined as the SDK's users join them): [(text, calls, parts, last)]."""
    cfg = gtypes.GenerateContentConfig(**config) if config else None
    out = []
    r = gm.models.generate_content(model=MODEL, contents="case:" + case, config=cfg)
    out.append((r.text, r.function_calls or [], r.candidates[0].content.parts, r))
    chunks = list(gm.models.generate_content_stream(
        model=MODEL, contents="case:" + case, config=cfg))
    expect(chunks, f"{case}: no chunks")
    parts = [p for c in chunks if c.candidates and c.candidates[0].content
             and c.candidates[0].content.parts for p in c.candidates[0].content.parts]
    text = "".join(p.text for p in parts if p.text and not p.thought) or None
    calls = [p.function_call for p in parts if p.function_call]
    out.append((text, calls, parts, chunks[-1]))
    return out


def gemini_plain():
    r = gm_raw("text")
    c = r.candidates[0]
    expect(c.content.role == "model" and c.content.parts[0].text == "Hello from the fake!", r)
    expect(c.finish_reason == gtypes.FinishReason.STOP, c)
    u = r.usage_metadata
    expect((u.prompt_token_count, u.candidates_token_count, u.cached_content_token_count)
           == (100, 7, 60), u)
    for text, calls, _, last in gm_both("text"):
        expect(text == "Hello from the fake!" and not calls, text)
        expect(last.candidates[0].finish_reason == gtypes.FinishReason.STOP, last)
        u = last.usage_metadata
        expect((u.prompt_token_count, u.candidates_token_count, u.cached_content_token_count)
               == (100, 7, 60), u)
    chunks = gm_stream_raw("text")
    expect(all(c.candidates[0].finish_reason is None for c in chunks[:-1]
               if c.candidates), chunks)
    ok("gemini plain and stream + usage (cached)")


def gemini_tools():
    r = gm_raw("tools")
    calls = [p.function_call for p in r.candidates[0].content.parts if p.function_call]
    expect([(c.name, c.args) for c in calls]
           == [("get_weather", {"city": "Oslo"}), ("get_time", {"tz": "CET"})], calls)
    gm_stream_raw("tools")
    for _, calls, _, last in gm_both("tools"):
        expect([(c.name, c.args) for c in calls]
               == [("get_weather", {"city": "Oslo"}), ("get_time", {"tz": "CET"})], calls)
        expect(last.candidates[0].finish_reason == gtypes.FinishReason.STOP, last)
    ok("gemini parallel function calls, plain and stream")


def gemini_thinking():
    gm_raw("think_tools")
    gm_stream_raw("think_tools")
    for _, calls, parts, last in gm_both("think_tools"):
        thoughts = [p for p in parts if p.thought]
        expect("".join(p.text for p in thoughts) == "Six times seven.", parts)
        expect([(c.name, c.args) for c in calls] == [("calculator", {"expression": "6*7"})],
               parts)
        # The signature is bytes to the SDK: the served base64 decodes.
        signed = [p for p in parts if p.thought_signature]
        expect(signed and all(isinstance(p.thought_signature, bytes) for p in signed), parts)
        expect(last.usage_metadata is None or last.usage_metadata.thoughts_token_count is None
               or last.usage_metadata.thoughts_token_count >= 0, last)
    ok("gemini thought parts and thought signatures, plain and stream")


def gemini_finish_reasons():
    for case, reason in (("length", gtypes.FinishReason.MAX_TOKENS),
                         ("safety", gtypes.FinishReason.SAFETY)):
        for r in [gm_raw(case)] + gm_stream_raw(case)[-1:]:
            expect(r.candidates[0].finish_reason == reason, (case, r))
    for r in [gm_raw("blocked")] + gm_stream_raw("blocked")[-1:]:
        expect(not r.candidates, r)
        expect(r.prompt_feedback.block_reason == gtypes.BlockedReason.SAFETY, r)
    ok("gemini finish reasons: MAX_TOKENS, SAFETY, a blocked prompt")


def gemini_errors():
    try:
        gm.models.generate_content(model=MODEL, contents="case:error")
        raise AssertionError("no error raised")
    except genai_errors.ClientError as e:
        expect(e.code == 429 and e.status == "RESOURCE_EXHAUSTED", e)
        expect(e.message == "slow down", e)
    try:
        gm.models.generate_content(model=MODEL, contents="case:unavailable")
        raise AssertionError("no error raised")
    except genai_errors.ServerError as e:
        expect(e.code == 503 and e.status == "UNAVAILABLE", e)
    try:
        for _ in gm.models.generate_content_stream(model=MODEL, contents="case:midstream"):
            pass
        raise AssertionError("no mid-stream error raised")
    except genai_errors.APIError as e:
        expect("boom" in str(e), e)
    ok("gemini errors: 429, 503, mid-stream")


def gemini_caches():
    cache = gm.caches.create(model=MODEL, config=gtypes.CreateCachedContentConfig(
        display_name="sdk-check", system_instruction="You are terse.",
        contents=[gtypes.Content(role="user", parts=[gtypes.Part(text="A long shared prefix.")])],
        tools=[gtypes.Tool(function_declarations=[gtypes.FunctionDeclaration(
            name="get_time", description="The time.",
            parameters_json_schema={"type": "object", "properties": {}})])],
        ttl="600s"))
    expect(cache.name.startswith("cachedContents/"), cache)
    expect(cache.model == "models/" + MODEL and cache.display_name == "sdk-check", cache)
    expect(cache.expire_time is not None and cache.usage_metadata.total_token_count > 0, cache)
    status, raw = post("/v1beta/" + cache.name, None, method="GET")
    expect(status == 200, raw)
    gtypes.CachedContent.model_validate_json(json.dumps(raw))
    got = gm.caches.get(name=cache.name)
    expect(got.name == cache.name and got.expire_time == cache.expire_time, got)
    later = gm.caches.update(name=cache.name,
                             config=gtypes.UpdateCachedContentConfig(ttl="7200s"))
    expect(later.expire_time > cache.expire_time, (later, cache))
    r = gm.models.generate_content(model=MODEL, contents="case:plain",
                                   config=gtypes.GenerateContentConfig(cached_content=cache.name))
    expect(r.usage_metadata.cached_content_token_count
           == cache.usage_metadata.total_token_count, (r.usage_metadata, cache))
    gm.caches.delete(name=cache.name)
    try:
        gm.models.generate_content(model=MODEL, contents="case:plain",
                                   config=gtypes.GenerateContentConfig(cached_content=cache.name))
        raise AssertionError("a deleted cache was used")
    except genai_errors.ClientError as e:
        expect(e.code == 403 and e.status == "PERMISSION_DENIED", e)
        expect("CachedContent not found" in e.message, e)
    try:
        gm.caches.get(name=cache.name)
        raise AssertionError("a deleted cache was found")
    except genai_errors.ClientError as e:
        expect(e.code in (403, 404), e)
    ok("gemini cachedContents: create, get, update ttl, use (cached tokens), delete")


def main():
    for check in (chat_plain, chat_stream, chat_tools, chat_errors,
                  anthropic_plain, anthropic_streams, anthropic_errors, responses_all,
                  gemini_plain, gemini_tools, gemini_thinking, gemini_finish_reasons,
                  gemini_errors, gemini_caches):
        check()
    print("all SDK checks passed", flush=True)


if __name__ == "__main__":
    main()
