"""Stream parsing and request bodies, one behaviour per test, on lines as engines send them."""

import json

import pytest

from loadtest.client.protocols import ProtocolError, StreamEvent, openai, tgi


def test_openai_completion_chunk_carries_output():
    line = b'data: {"choices":[{"index":0,"text":"Hi","finish_reason":null}],"usage":null}\n'
    assert openai.parse_line(line) == StreamEvent(output=True, text="Hi")


def test_openai_chat_role_chunk_carries_no_output():
    line = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n'
    assert openai.parse_line(line).output is False


def test_openai_chat_content_chunk_carries_output():
    line = b'data: {"choices":[{"index":0,"delta":{"content":" world"}}]}\n'
    assert openai.parse_line(line).output is True


def test_a_token_whose_text_is_still_empty_is_output():
    # byte-level BPE: half of a multi-byte character decodes to "" until the rest arrives
    line = b'data: {"choices":[{"index":0,"text":"","finish_reason":null}]}\n'
    assert openai.parse_line(line).output is True


def test_an_empty_closing_chunk_is_not_output():
    line = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n'
    assert openai.parse_line(line) == StreamEvent(finish_reason="length")


def test_openai_usage_chunk_gives_token_counts():
    line = (b'data: {"choices":[],"usage":{"prompt_tokens":4,"total_tokens":9,'
            b'"completion_tokens":5}}\n')
    event = openai.parse_line(line)
    assert (event.output, event.prompt_tokens, event.output_tokens) == (False, 4, 5)


def test_openai_finish_reason_is_kept():
    line = b'data: {"choices":[{"index":0,"text":"x","finish_reason":"length"}]}\n'
    assert openai.parse_line(line).finish_reason == "length"


def test_openai_done_finishes_the_stream():
    assert openai.parse_line(b"data: [DONE]\n").finished is True


def test_blank_lines_and_comments_are_skipped():
    assert openai.parse_line(b"\n") is None
    assert openai.parse_line(b": ping\n") is None
    assert openai.parse_line(b"\r\n") is None


def test_textgen_finishing_chunk_with_null_usage_is_tolerated():
    line = b'data: {"choices":[{"index":0,"text":"","finish_reason":"stop"}],"usage":null}\n'
    event = openai.parse_line(line)
    assert (event.output, event.finish_reason, event.output_tokens) == (False, "stop", None)


def test_openai_error_event_is_an_error():
    line = b'data: {"error":{"message":"out of memory","type":"server_error"}}\n'
    assert openai.parse_line(line).error == "out of memory"


def test_bad_json_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        openai.parse_line(b"data: {not json\n")


def test_non_sse_line_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        openai.parse_line(b"<html>502 Bad Gateway</html>\n")


def test_openai_body_asks_for_usage_and_streams():
    body = json.loads(openai.build_body("completions", "m", "hello", 16, ignore_eos=True,
                                        temperature=0.0))
    assert body == {"model": "m", "prompt": "hello", "max_tokens": 16, "stream": True,
                    "stream_options": {"include_usage": True}, "temperature": 0.0,
                    "ignore_eos": True}


def test_openai_chat_body_sends_messages():
    body = json.loads(openai.build_body("chat", "m", "hello", 16, ignore_eos=False,
                                        temperature=0.0))
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert "ignore_eos" not in body and "prompt" not in body


# TGI native: `data:` with no space, no [DONE], details only on the last event.
TGI_TOKEN = b'data:{"index":1,"token":{"id":42,"text":" Deep","logprob":-0.3,"special":false},' \
            b'"top_tokens":null,"generated_text":null,"details":null}\n'
TGI_LAST = b'data:{"index":3,"token":{"id":2,"text":"</s>","logprob":-0.1,"special":true},' \
           b'"top_tokens":null,"generated_text":"Deep learning","details":{"finish_reason":' \
           b'"eos_token","generated_tokens":3,"input_length":7,"seed":null}}\n'


def test_tgi_token_event_without_space_after_data():
    assert tgi.parse_line(TGI_TOKEN) == StreamEvent(output=True, text=" Deep")


def test_tgi_last_event_finishes_with_details():
    event = tgi.parse_line(TGI_LAST)
    assert event == StreamEvent(output=True, finished=True, finish_reason="eos_token",
                                prompt_tokens=7, output_tokens=3)


def test_tgi_error_event():
    line = b'data:{"error":"Request failed during generation","error_type":"generation"}\n'
    assert tgi.parse_line(line).error == "generation: Request failed during generation"


def test_tgi_body_asks_for_details():
    body = json.loads(tgi.build_body("generate", "", "hi", 20, ignore_eos=False, temperature=0.0))
    assert body == {"inputs": "hi", "parameters": {"max_new_tokens": 20, "details": True}}


def test_tgi_refuses_ignore_eos():
    with pytest.raises(ValueError, match="ignore_eos"):
        tgi.build_body("generate", "", "hi", 20, ignore_eos=True, temperature=0.0)


# transformers serve 5.23 (--continuous-batching), lines as it sent them: no [DONE]; its last
# chunk carries the finish reason and usage together, and that chunk ends the stream.
TF_TEXT = (b'data: {"id":"29a44de5-f45a-430a-8af1-53e4d0e76d57","choices":[{"index":0,"text":"comp"}],'
           b'"created":1795430826,"model":"/work/main/models/tiny-llama@main","object":"text_completion"}\n')
TF_LAST = (b'data: {"id":"29a44de5-f45a-430a-8af1-53e4d0e76d57","choices":[{"finish_reason":"length",'
           b'"index":0,"text":""}],"created":1795430826,"model":"/work/main/models/tiny-llama@main",'
           b'"object":"text_completion","usage":{"completion_tokens":4,"prompt_tokens":4,'
           b'"total_tokens":8}}\n')
TF_CHAT_LAST = (b'data: {"id":"29dec9b8-5af6-4458-a8d5-1e3bcb93d4e1","choices":[{"delta":{},"index":0,'
                b'"finish_reason":"length"}],"created":1795430827,'
                b'"model":"/work/main/models/tiny-llama@main","object":"chat.completion.chunk",'
                b'"system_fingerprint":"","usage":{"completion_tokens":4,"prompt_tokens":15,'
                b'"total_tokens":19}}\n')


def test_transformers_text_chunk_carries_output():
    assert openai.parse_line(TF_TEXT) == StreamEvent(output=True, text="comp")


@pytest.mark.parametrize("line", [TF_LAST, TF_CHAT_LAST], ids=["completions", "chat"])
def test_transformers_last_chunk_finishes_with_usage(line):
    event = openai.parse_line(line)
    assert (event.output, event.finished, event.finish_reason, event.output_tokens) == \
        (False, True, "length", 4)


def test_transformers_ignore_eos_is_a_generation_config_without_eos():
    body = json.loads(openai.build_body("completions", "m", "hello", 16, ignore_eos=True,
                                        temperature=0.0, ignore_eos_as="generation_config"))
    assert "ignore_eos" not in body  # transformers serve refuses unknown fields (HTTP 422)
    assert json.loads(body["generation_config"]) == {"eos_token_id": -1, "do_sample": False}
    assert body["max_tokens"] == 16


# llama.cpp's llama-server (llama-cpp-python 0.3.36's vendored tree), lines as it sent them with
# ignore_eos: a completion's last chunk carries the finish reason and usage together, chat's usage
# comes in a chunk of its own with no choices; both streams then end with [DONE].
LLAMA_TEXT = (b'data: {"choices":[{"text":"comp","index":0,"logprobs":null,"finish_reason":null}],'
              b'"created":1795432595,"model":"tiny-llama","system_fingerprint":"b0-unknown",'
              b'"object":"text_completion","id":"chatcmpl-onRG6pd0D2iOtAAWMmYerU4gRqfKySwI"}\n')
LLAMA_LAST = (b'data: {"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],'
              b'"created":1795432595,"model":"tiny-llama","system_fingerprint":"b0-unknown",'
              b'"object":"text_completion","usage":{"completion_tokens":5,"prompt_tokens":4,'
              b'"total_tokens":9,"prompt_tokens_details":{"cached_tokens":0}},'
              b'"id":"chatcmpl-onRG6pd0D2iOtAAWMmYerU4gRqfKySwI","timings":{"cache_n":0,"prompt_n":4,'
              b'"prompt_ms":66.373,"predicted_n":5,"predicted_ms":12.307}}\n')
LLAMA_CHAT_ROLE = (b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant",'
                   b'"content":null}}],"created":1795432595,"id":"chatcmpl-ddLXASi1DmOxsr9HJ8plQqdaMmBUW8s9",'
                   b'"model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk"}\n')
LLAMA_CHAT_USAGE = (b'data: {"choices":[],"created":1795432595,"id":"chatcmpl-ddLXASi1DmOxsr9HJ8plQqdaMmBUW8s9",'
                    b'"model":"tiny-llama","system_fingerprint":"b0-unknown","object":"chat.completion.chunk",'
                    b'"usage":{"completion_tokens":4,"prompt_tokens":15,"total_tokens":19,'
                    b'"prompt_tokens_details":{"cached_tokens":0}},"timings":{"cache_n":0,"prompt_n":15}}\n')


def test_llama_server_completion_stream_ends_with_usage_on_its_last_chunk():
    assert openai.parse_line(LLAMA_TEXT).output is True
    event = openai.parse_line(LLAMA_LAST)
    assert (event.output, event.finish_reason, event.prompt_tokens, event.output_tokens) == \
        (False, "length", 4, 5)


def test_llama_server_chat_role_chunk_is_no_token_and_usage_chunk_counts():
    assert openai.parse_line(LLAMA_CHAT_ROLE).output is False
    event = openai.parse_line(LLAMA_CHAT_USAGE)
    assert (event.output, event.prompt_tokens, event.output_tokens) == (False, 15, 4)


# An engine is input too: what the dialects do with a field of the wrong type (the package
# docstring says why each field is refused or flagged).

def test_a_count_of_the_wrong_type_is_ignored_and_named():
    line = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":"many"}}\n'
    event = openai.parse_line(line)
    assert (event.output_tokens, event.prompt_tokens) == (None, 3)
    assert event.flaw == "usage.completion_tokens is a string 'many', not a token count"


@pytest.mark.parametrize("value", [b"-1", b"true", b"5.0", b"2147483648"])
def test_a_negative_boolean_float_or_huge_count_is_no_count(value: bytes):
    event = openai.parse_line(b'data: {"choices":[],"usage":{"completion_tokens":' + value + b'}}\n')
    assert event.output_tokens is None and "completion_tokens" in event.flaw


def test_usage_that_is_not_an_object_is_ignored_and_named():
    event = openai.parse_line(b'data: {"choices":[],"usage":"lots"}\n')
    assert event.output_tokens is None and event.flaw.startswith("usage is a string")


@pytest.mark.parametrize("chunk, named", [
    (b'{"choices":{"text":"x"}}', "choices is an object"),
    (b'{"choices":["x"]}', "a choice is a string"),
    (b'{"choices":[{"text":7}]}', "choices[].text is an integer 7"),
    (b'{"choices":[{"delta":{"content":["x"]}}]}', "choices[].delta.content is a list"),
    (b'{"choices":[{"delta":"x"}]}', "choices[].delta is a string"),
    (b'{"choices":[{"text":"x","finish_reason":1}]}', "finish_reason is an integer"),
    (b'{"choices":[{"text":"x","token_ids":[1,-2]}]}', "token_ids"),
])
def test_a_chunk_of_the_wrong_shape_is_a_protocol_error_naming_the_field(chunk: bytes, named: str):
    with pytest.raises(ProtocolError, match=named.replace("[", r"\[").replace("]", r"\]")):
        openai.parse_line(b"data: " + chunk + b"\n")


def test_invalid_utf8_is_a_protocol_error_that_says_so():
    with pytest.raises(ProtocolError, match="invalid UTF-8"):
        openai.parse_line(b'data: {"choices":[{"text":"\xff"}]}\n')


def test_done_is_the_end_marker():
    assert openai.parse_line(b"data: [DONE]\n").end_marker is True


@pytest.mark.parametrize("event, named", [
    (b'{"token":"x"}', "token is a string"),
    (b'{"token":{"text":5}}', "token.text is an integer"),
    (b'{"token":{"text":"x"},"details":[1]}', "details is a list"),
    (b'{"token":{"text":"x"},"details":{"finish_reason":2,"generated_tokens":1}}',
     "details.finish_reason is an integer"),
])
def test_tgi_event_of_the_wrong_shape_is_a_protocol_error_naming_the_field(event: bytes,
                                                                           named: str):
    with pytest.raises(ProtocolError, match=named):
        tgi.parse_line(b"data:" + event + b"\n")


def test_tgi_count_of_the_wrong_type_is_ignored_and_named():
    event = tgi.parse_line(b'data:{"token":{"text":"x"},"details":{"finish_reason":"length",'
                           b'"generated_tokens":-3,"input_length":7}}\n')
    assert (event.finished, event.output_tokens, event.prompt_tokens) == (True, None, 7)
    assert event.flaw == "details.generated_tokens is an integer -3, not a token count"
