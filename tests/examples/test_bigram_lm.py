"""examples/serving/bigram_lm.py through the official ``openai`` client, as a real process on
loopback; plain HTTP only for what the client cannot say (``/health``, ``/stats``, unknown
paths)."""

from __future__ import annotations

import importlib.util
import math
import sys
from functools import partial

import pytest

from bigramkit import SERVER, BigramServer
from waiting import poll

openai = pytest.importorskip("openai", reason="the openai client is not installed (pip install "
                             "'rota[test]')")

wait = partial(poll, timeout=30.0)
spec = importlib.util.spec_from_file_location("bigram_lm", SERVER)
bigram_lm = sys.modules["bigram_lm"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bigram_lm)

HELLO = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]
HELLO_PROMPT = "system: Be brief.\nuser: Hello there\nassistant:"  # the flattened messages


def client(server: BigramServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)


def test_lists_the_models_it_was_started_with(bigram_server):
    models = client(bigram_server).models.list()
    assert [m.id for m in models.data] == ["tiny", "other"]
    assert client(bigram_server).models.retrieve("other").id == "other"


def test_chat_gives_the_same_answer_to_the_same_request_and_counts_characters(bigram_server):
    api = client(bigram_server)
    first = api.chat.completions.create(model="tiny", messages=HELLO, max_tokens=24)
    again = api.chat.completions.create(model="tiny", messages=HELLO, max_tokens=24)
    other = api.chat.completions.create(model="tiny", messages=HELLO, max_tokens=24, seed=7)
    text = first.choices[0].message.content
    assert first.choices[0].message.role == "assistant"
    assert text == again.choices[0].message.content and len(text) == 24
    assert other.choices[0].message.content != text  # another seed, another draw
    assert first.choices[0].finish_reason == "length"
    assert (first.usage.prompt_tokens, first.usage.completion_tokens,
            first.usage.total_tokens) == (len(HELLO_PROMPT), 24, len(HELLO_PROMPT) + 24)
    newer = api.chat.completions.create(model="tiny", messages=HELLO, max_completion_tokens=5)
    assert newer.choices[0].message.content == text[:5]  # the same draws, fewer of them


def test_a_chat_stream_comes_in_chunks_that_add_up_to_the_whole_answer(bigram_server):
    api = client(bigram_server)
    whole = api.chat.completions.create(model="tiny", messages=HELLO, max_tokens=20)
    chunks = list(api.chat.completions.create(model="tiny", messages=HELLO, max_tokens=20,
                                              stream=True,
                                              stream_options={"include_usage": True}))
    content = [c.choices[0].delta.content for c in chunks
               if c.choices and c.choices[0].delta.content]
    assert len(content) > 5
    assert "".join(content) == whole.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
    assert all(c.usage is None for c in chunks[:-1])


def test_completions_greedy_and_stop_sequences(bigram_server):
    api = client(bigram_server)
    greedy = api.completions.create(model="other", prompt="The cluster", max_tokens=30,
                                    temperature=0).choices[0]
    sampled = api.completions.create(model="other", prompt="The cluster", max_tokens=30)
    text = sampled.choices[0].text
    assert len(greedy.text) == 30 and len(text) == 30
    assert greedy.text == api.completions.create(model="other", prompt="Another cluster",
                                                 max_tokens=30, temperature=0).choices[0].text
    # only the last character of the prompt matters to a bigram model without sampling
    stop = text[12:14]
    cut = text.index(stop)
    stopped = api.completions.create(model="other", prompt="The cluster", max_tokens=30,
                                     stop=[stop, "never seen"])
    assert stopped.choices[0].text == text[:cut]
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.usage.completion_tokens == cut + len(stop)  # the stop sequence was generated
    streamed = api.completions.create(model="other", prompt="The cluster", max_tokens=30,
                                      stop=stop, stream=True)
    assert "".join(c.choices[0].text for c in streamed) == text[:cut]


@pytest.mark.parametrize("tokens, stops, shown, generated, stopped", [
    # each token is shown once it cannot begin a stop sequence
    (["a", "b", "c"], (), ["a", "b", "c"], 3, 0),
    # "x" could begin "xy": held back, then shown with "z"
    (["a", "x", "z"], ("xy",), ["a", "", "xz"], 3, 0),
    # "xy" completes: the text ends before it; the fourth token is never drawn
    (["a", "x", "y", "b"], ("xy",), ["a", "", ""], 3, 1),
    # a held-back tail at the end of the tokens is shown
    (["a", "x"], ("xy",), ["a", "", "x"], 2, 0),
    # the earliest of two stop sequences wins
    (["a", "b", "c", "d"], ("cd", "bc"), ["a", "", ""], 3, 1),
], ids=["no-stop", "held-back", "stopped", "tail", "earliest"])
def test_stop_sequences_are_never_shown(tokens, stops, shown, generated, stopped):
    counter = [0, 0]
    assert list(bigram_lm.until_stop(iter(tokens), stops, counter)) == shown
    assert counter == [generated, stopped]


def test_the_port_comes_from_the_option_then_rota_port_then_8000(monkeypatch):
    monkeypatch.delenv("ROTA_PORT", raising=False)
    assert bigram_lm.parse_args([]).port == 8000
    monkeypatch.setenv("ROTA_PORT", "9123")
    assert bigram_lm.parse_args([]).port == 9123
    assert bigram_lm.parse_args(["--port", "9200"]).port == 9200
    twice = bigram_lm.parse_args(["--model", "a", "--model", "b", "--model", "a"])
    assert twice.models == ["a", "b"]


@pytest.mark.parametrize("argv, env, message", [
    (["--port", "70000"], None, "--port must be 1 to 65535"),
    ([], "eighty", "ROTA_PORT must be a port number, got 'eighty'"),
    (["--load-seconds", "-1"], None, "--load-seconds must be 0 or more"),
    (["--token-delay", "nan"], None, "--token-delay must be 0 or more"),
    (["--embedding-dim", "0"], None, "--embedding-dim must be 1 to 4096"),
    (["--model", ""], None, "--model needs a non-empty name"),
])
def test_bad_options_are_named(monkeypatch, capsys, argv, env, message):
    monkeypatch.setenv("ROTA_PORT", env or "8000")
    with pytest.raises(SystemExit) as exited:
        bigram_lm.parse_args(argv)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_embeddings_are_deterministic_unit_vectors(bigram_server):
    api = client(bigram_server)
    texts = ["a GPU cluster", "a GPU clusters", "tea in the evening"]
    decoded = api.embeddings.create(model="tiny", input=texts)  # the client asks for base64
    floats = api.embeddings.create(model="tiny", input=texts, encoding_format="float")
    vectors = [d.embedding for d in decoded.data]
    assert [d.index for d in decoded.data] == [0, 1, 2]
    assert vectors == [d.embedding for d in floats.data]
    assert all(len(v) == 32 and math.isclose(math.hypot(*v), 1.0, rel_tol=1e-5) for v in vectors)
    single = api.embeddings.create(model="tiny", input="a GPU cluster", encoding_format="float")
    assert single.data[0].embedding == vectors[0]
    assert decoded.usage.prompt_tokens == sum(map(len, texts))

    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b))

    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2])
    short = api.embeddings.create(model="tiny", input="abc", dimensions=8, encoding_format="float")
    assert len(short.data[0].embedding) == 8
    assert math.isclose(math.hypot(*short.data[0].embedding), 1.0, rel_tol=1e-5)


def test_an_unknown_model_is_not_found(bigram_server):
    with pytest.raises(openai.NotFoundError) as raised:
        client(bigram_server).chat.completions.create(model="gpt-4", messages=HELLO)
    assert raised.value.code == "model_not_found" and raised.value.param == "model"
    assert "tiny, other" in raised.value.message


@pytest.mark.parametrize("fields, param", [
    ({"n": 2}, "n"),
    ({"max_tokens": 5000}, "max_tokens"),
    ({"temperature": 3}, "temperature"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"logprobs": True}, "logprobs"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
])
def test_a_bad_field_is_named_in_the_error(bigram_server, fields, param):
    body = {"model": "tiny", "messages": HELLO, **fields}
    with pytest.raises(openai.BadRequestError) as raised:
        client(bigram_server).chat.completions.create(**body)
    assert raised.value.param == param and param.split("[")[0] in raised.value.message


def test_errors_outside_the_client_have_openai_shape(bigram_server):
    http = bigram_server.http
    unknown = http.post("/v1/nothing", json={})
    assert unknown.status_code == 404
    assert unknown.json()["error"]["message"] == "Invalid URL (POST /v1/nothing)"
    wrong = http.get("/v1/chat/completions")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert set(wrong.json()["error"]) == {"message", "type", "param", "code"}
    garbled = http.post("/v1/completions", content=b"{not json")
    assert garbled.status_code == 400 and "not valid JSON" in garbled.json()["error"]["message"]


def test_not_ready_until_loaded(start_server):
    server = start_server("--load-seconds", "5", ready=False)
    assert server.http.get("/health").status_code == 503
    with pytest.raises(openai.InternalServerError) as raised:
        client(server).completions.create(model="tiny", prompt="hi")
    assert raised.value.status_code == 503 and raised.value.code == "model_loading"
    wait(server.healthy, "/health to say ok after loading")
    assert server.http.get("/health").json() == {"status": "ok"}
    assert client(server).completions.create(model="tiny", prompt="hi").choices[0].text


def test_a_stream_the_client_drops_is_cancelled(start_server):
    server = start_server("--token-delay", "0.05")
    stream = client(server).chat.completions.create(model="tiny", messages=HELLO,
                                                    max_tokens=4000, stream=True)
    received = [next(stream) for _ in range(3)]
    assert received[-1].choices[0].delta.content
    assert server.stats()["in_flight"] == 1
    stream.close()
    after = wait(lambda: (s := server.stats())["cancelled"] == 1 and s, "the server to notice")
    assert after == {"requests": 1, "in_flight": 0, "completed": 0, "cancelled": 1}
    # and it still serves
    assert client(server).completions.create(model="tiny", prompt="hi", max_tokens=2)
    assert server.stats()["completed"] == 1
