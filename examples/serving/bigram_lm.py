"""A toy text model behind an OpenAI-compatible HTTP API: for tests and demos, not a real LLM.

The model is a character-level bigram table counted at start-up from the short text in
``CORPUS``: one token is one character, and the next character depends only on the one before.
Its output looks like English spelled by someone who has never seen a word twice. What is real is
the server around it: OpenAI's wire format (so the official ``openai`` client and anything built
on it talk to it unchanged), streaming, readiness, cancellation and keep-alive, so that rota's
serving gateway can be run and tested end to end on a machine without a GPU.

    python3 bigram_lm.py [--host 127.0.0.1] [--port PORT] [--model NAME]... [--load-seconds S]
                         [--token-delay S] [--embedding-dim N]

- ``--port``: else the ``ROTA_PORT`` environment variable, else 8000.
- ``--model NAME`` (repeatable, default ``tiny``): the names it serves; all of them are the same
  bigram table, and a request for any other name is answered 404 ``model_not_found``.
- ``--load-seconds S``: pretends loading the model takes S seconds; ``GET /health`` answers 503
  until then, and so do the model routes (with ``Retry-After``).
- ``--token-delay S``: the model takes S seconds per generated token: streamed tokens arrive S
  apart, and a whole answer takes ``max_tokens`` times S.
- ``--embedding-dim N`` (default 64): the length of the embedding vectors.

Routes: ``GET /health``, ``GET /v1/models`` (and ``/v1/models/NAME``), ``POST /v1/completions``,
``POST /v1/chat/completions``, ``POST /v1/embeddings``, ``GET /stats``.

Generation. ``max_tokens`` (default 16, at most 4096; ``max_completion_tokens`` is read first in
chat), ``temperature`` (0 to 2; 0 always takes the likeliest next character, anything else draws
from the table sharpened or flattened by it, with a generator seeded from the model name, the
prompt, the temperature and ``seed``: the same request always gets the same answer), ``stop``
(a string or up to 4; the answer ends before the first one and does not contain it), ``stream``
with ``stream_options.include_usage``, ``n`` (1 only). Chat turns ``messages`` into one prompt,
a line ``role: content`` each, then ``assistant:``. Usage counts characters: the prompt's, and
every generated one, a stop sequence's included. Fields this model cannot honour (``logprobs``,
``echo``, ``suffix``, ``best_of``, ``tools``, ``functions``, a ``response_format`` other than
text) are refused with 400 when set; other OpenAI fields (``top_p``, the penalties, ``user``)
are accepted and have no effect.

Embeddings are deterministic unit vectors: counts of the input's character pairs, through a
fixed random projection, normalised; similar strings get similar vectors. ``encoding_format``
``float`` or ``base64`` (little-endian float32, as OpenAI's), ``dimensions`` keeps the first N
components and normalises again.

``GET /stats`` counts the requests to the three model routes: ``requests`` received,
``in_flight``, ``completed`` (answered in full, errors included) and ``cancelled`` (the client
went away before the end: the server notices ``http.disconnect`` between tokens and stops
generating), so that ``requests == in_flight + completed + cancelled``. A request answered at
once, without streaming or ``--token-delay``, has no moment between tokens and always completes.

Replacing it with a real model: a service that runs vLLM's OpenAI server instead,
``vllm serve MODEL --host 127.0.0.1 --port $ROTA_PORT --served-model-name NAME``, exposes the
same routes and ``/health``, so a gateway that works with this file works with vLLM unchanged.
Two differences: vLLM listens only once its weights are loaded (a refused connection before,
where this file answers 503), and ``/stats`` is this file's own (vLLM has ``/metrics``).

Standard library, numpy and uvicorn only, one raw ASGI application (no framework): a few
thousand requests per second on one core.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import bisect
import hashlib
import json
import os
import random
import sys
import time
from typing import Any, Callable, Iterator

import numpy as np

CORPUS = """\
The cluster woke before the sun. Each node counted its cards and wrote the number down, and the
scheduler read the list twice, as it always did, before it let anyone in. A student with one
small notebook asked for half a card and got it at once. A team with a long training run asked
for sixty four cards and was told to wait: the queue was fair, and fairness takes time. At noon
a service that answers questions woke from its sleep when the first question came, loaded its
weights, answered, and went back to sleep when nobody asked anything for a while. Nothing was
wasted and nobody was starved. In the evening the big run started on every card of the east
room, saved its state each hour, and when an urgent job arrived it paused, gave its cards back,
and later went on from where it stopped. The operators drank their tea and read the graphs.
"""

MAX_TOKENS_DEFAULT = 16
MAX_TOKENS_CAP = 4096
MAX_STOPS = 4
MAX_BODY = 8 << 20
YIELD_EVERY = 16  # a stream without --token-delay lets the loop run this often, to see a disconnect
UNSUPPORTED = {  # field: the value that means "not asked for"
    "logprobs": (None, False, 0), "top_logprobs": (None, 0), "echo": (None, False),
    "suffix": (None, ""), "best_of": (None, 1), "tools": (None, []), "functions": (None, []),
    "response_format": (None, {"type": "text"}),
}


class BadRequest(Exception):
    """A request answered with an OpenAI error object."""

    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 code: str | None = None, kind: str = "invalid_request_error",
                 headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        super().__init__(message)
        self.message, self.param, self.status = message, param, status
        self.code, self.kind, self.headers = code, kind, headers

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param,
                          "code": self.code}}


class BigramModel:
    """Next-character probabilities counted from ``corpus`` (read as a ring, so every character
    has a successor), and the embedding projection."""

    def __init__(self, corpus: str, embedding_dim: int) -> None:
        self.chars = sorted(set(corpus))
        self.index = {c: i for i, c in enumerate(self.chars)}
        ids = np.array([self.index[c] for c in corpus])
        size = len(self.chars)
        self.counts = np.zeros((size, size))
        np.add.at(self.counts, (ids, np.roll(ids, -1)), 1.0)
        self.greedy = self.counts.argmax(axis=1).tolist()
        self.space = self.index[" "]
        self._cdfs: dict[float, list[list[float]]] = {}
        # character pairs, an unknown character being one more symbol, onto embedding_dim axes
        self.projection = np.random.default_rng(0).standard_normal(
            ((size + 1) ** 2, embedding_dim)).astype(np.float32)

    def tokens(self, prompt: str, max_tokens: int, temperature: float, seed: int) -> Iterator[str]:
        """The next ``max_tokens`` characters after ``prompt``."""
        state = self.space
        for c in reversed(prompt):
            if c in self.index:
                state = self.index[c]
                break
        chars = self.chars
        if temperature == 0:
            greedy = self.greedy
            for _ in range(max_tokens):
                state = greedy[state]
                yield chars[state]
            return
        cdfs, draw = self._cdf(temperature), random.Random(seed).random
        for _ in range(max_tokens):
            state = bisect.bisect_right(cdfs[state], draw())
            yield chars[state]

    def _cdf(self, temperature: float) -> list[list[float]]:
        cdfs = self._cdfs.get(temperature)
        if cdfs is None:
            weights = (self.counts / self.counts.max(axis=1, keepdims=True)) ** (1.0 / temperature)
            cdf = np.cumsum(weights, axis=1)
            cdfs = (cdf / cdf[:, -1:]).tolist()
            if len(self._cdfs) < 64:
                self._cdfs[temperature] = cdfs
        return cdfs

    def embed(self, text: str, dimensions: int) -> np.ndarray:
        unknown = len(self.chars)
        ids = [self.index.get(c, unknown) for c in " " + text]
        pairs = np.array(ids[:-1]) * (unknown + 1) + np.array(ids[1:])
        counts = np.bincount(pairs, minlength=(unknown + 1) ** 2).astype(np.float32)
        vector = (counts @ self.projection)[:dimensions]
        return vector / np.linalg.norm(vector)


def until_stop(tokens: Iterator[str], stops: tuple[str, ...], counter: list[int]) -> Iterator[str]:
    """The text of ``tokens`` as it may be shown: each piece once it cannot be the start of a
    stop sequence, ending before the first stop sequence. ``counter`` gets
    ``[tokens generated, 1 if a stop sequence ended it]``."""
    pending = ""  # generated, not yet shown: a stop sequence can only start here
    for token in tokens:
        counter[0] += 1
        if not stops:
            yield token
            continue
        pending += token
        hits = [i for i in (pending.find(s) for s in stops) if i >= 0]
        if hits:
            counter[1] = 1
            yield pending[:min(hits)]
            return
        held = next((k for k in range(min(len(pending), max(map(len, stops)) - 1), 0, -1)
                     if any(s.startswith(pending[-k:]) for s in stops)), 0)
        yield pending[:len(pending) - held]
        pending = pending[len(pending) - held:]
    if pending:
        yield pending


# ---- reading requests -------------------------------------------------------------------------

def field(body: dict[str, Any], name: str, kinds: tuple[type, ...], default: Any,
          check: Callable[[Any], bool] = lambda v: True, rule: str = "") -> Any:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds) \
            or not check(value):
        raise BadRequest(f"'{name}' must be {rule}, got {json.dumps(value)[:80]}", name)
    return value


def stop_field(body: dict[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    stops = (stop,) if isinstance(stop, str) else stop if isinstance(stop, list) else None
    if stop is None:
        return ()
    if stops is None or not 0 < len(stops) <= MAX_STOPS \
            or not all(isinstance(s, str) and s for s in stops):
        raise BadRequest(f"'stop' must be a non-empty string or a list of 1 to {MAX_STOPS} "
                         f"of them, got {json.dumps(stop)[:80]}", "stop")
    return tuple(stops)


def chat_prompt(messages: Any) -> str:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list of messages", "messages")
    lines = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(f"'{where}' must be an object with a string 'role'", where)
        content = message.get("content")
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text"
                       and isinstance(p.get("text"), str) for p in content):
                raise BadRequest(f"'{where}.content' parts must be text parts ({{\"type\": "
                                 "\"text\", \"text\": ...}): this model reads text only",
                                 f"{where}.content")
            content = "".join(p["text"] for p in content)
        elif content is not None and not isinstance(content, str):
            raise BadRequest(f"'{where}.content' must be a string or a list of text parts",
                             f"{where}.content")
        lines.append(f"{message['role']}: {content or ''}\n")
    return "".join(lines) + "assistant:"


class Generation:
    """A validated completion or chat request."""

    def __init__(self, body: dict[str, Any], chat: bool) -> None:
        for name, defaults in UNSUPPORTED.items():
            if body.get(name) not in defaults:
                raise BadRequest(f"'{name}' is not supported by this toy model", name)
        if chat:
            self.prompt = chat_prompt(body.get("messages"))
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1:
                prompt = prompt[0]
            if not isinstance(prompt, str):
                raise BadRequest("'prompt' must be a string (or a list of one string)", "prompt")
            self.prompt = prompt
        tokens_field = "max_completion_tokens" if chat and body.get("max_completion_tokens") \
            is not None else "max_tokens"
        self.max_tokens = field(body, tokens_field, (int,), MAX_TOKENS_DEFAULT,
                                lambda v: 1 <= v <= MAX_TOKENS_CAP,
                                f"an integer, 1 to {MAX_TOKENS_CAP}")
        self.temperature = float(field(body, "temperature", (int, float), 1.0,
                                       lambda v: 0 <= v <= 2, "a number from 0 to 2"))
        field(body, "n", (int,), 1, lambda v: v == 1, "1: this model gives one choice")
        self.seed = field(body, "seed", (int,), 0, rule="an integer")
        self.stream = field(body, "stream", (bool,), False, rule="true or false")
        options = field(body, "stream_options", (dict,), {}, rule="an object")
        if options and not self.stream:
            raise BadRequest("'stream_options' is only allowed when 'stream' is true",
                             "stream_options")
        self.include_usage = field(options, "include_usage", (bool,), False, rule="true or false")
        self.stops = stop_field(body)

    def seed_for(self, model: str) -> int:
        key = f"{model}\0{self.temperature!r}\0{self.seed}\0{self.prompt}".encode()
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


# ---- the HTTP side ----------------------------------------------------------------------------

async def send_json(send: Callable, status: int, value: Any,
                    headers: tuple[tuple[bytes, bytes], ...] = ()) -> bool:
    body = json.dumps(value, separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)), *headers]})
    await send({"type": "http.response.body", "body": body})
    return True


async def read_json(receive: Callable) -> dict[str, Any] | None:
    """The request's JSON object, or None when the client went away before sending it all."""
    parts, more = [], True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        parts.append(message.get("body", b""))
        more = message.get("more_body", False)
        if sum(map(len, parts)) > MAX_BODY:
            raise BadRequest(f"the body is larger than {MAX_BODY} bytes", status=413)
    try:
        value = json.loads(b"".join(parts))
    except ValueError as e:
        raise BadRequest(f"the body is not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise BadRequest("the body must be a JSON object")
    return value


class Watch:
    """Notices the client going away while an answer is being produced: once the request's body
    is read, the next ``receive()`` returns only with ``http.disconnect``."""

    def __init__(self, receive: Callable) -> None:
        self.task = asyncio.ensure_future(receive())

    @property
    def gone(self) -> bool:
        return self.task.done()

    async def pause(self, seconds: float) -> None:
        await asyncio.wait((self.task,), timeout=seconds)

    def close(self) -> None:
        self.task.cancel()


MODEL_ROUTES = ("/v1/completions", "/v1/chat/completions", "/v1/embeddings")
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class Server:
    """The ASGI application: routes, readiness, the counters of ``/stats``."""

    def __init__(self, model: BigramModel, names: list[str], load_seconds: float,
                 token_delay: float) -> None:
        self.model, self.names = model, names
        self.load_seconds, self.token_delay = load_seconds, token_delay
        self.ready = load_seconds <= 0
        self.stats = {"requests": 0, "in_flight": 0, "completed": 0, "cancelled": 0}
        self.created = int(time.time())
        self.serial = 0
        self.routes: dict[str, dict[str, Callable]] = {
            "/health": {"GET": self.health}, "/stats": {"GET": self.get_stats},
            "/v1/models": {"GET": self.models},
            "/v1/completions": {"POST": self.completions},
            "/v1/chat/completions": {"POST": self.chat},
            "/v1/embeddings": {"POST": self.embeddings},
        }

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            return await self.lifespan(receive, send)
        path, method = scope["path"], scope["method"]
        methods = self.routes.get(path)
        if methods is None and path.startswith("/v1/models/"):
            methods = {"GET": self.one_model}
        try:
            if methods is None:
                raise BadRequest(f"Invalid URL ({method} {path})", status=404, code="unknown_url")
            handler = methods.get(method)
            if handler is None:
                allowed = ", ".join(methods)
                raise BadRequest(f"{method} is not allowed on {path}: use {allowed}", status=405,
                                 code="method_not_allowed", headers=((b"allow", allowed.encode()),))
            if path in MODEL_ROUTES:
                return await self.counted(handler, receive, send)
            await handler(scope, receive, send)
        except BadRequest as e:
            await send_json(send, e.status, e.body(), e.headers)

    async def counted(self, handler: Callable, receive: Callable, send: Callable) -> None:
        stats = self.stats
        stats["requests"] += 1
        stats["in_flight"] += 1
        outcome = "cancelled"
        try:
            try:
                finished = await handler(receive, send)
            except BadRequest as e:
                finished = await send_json(send, e.status, e.body(), e.headers)
            if finished:
                outcome = "completed"
        except Exception:
            outcome = "completed"  # a fault: uvicorn answers 500
            raise
        finally:
            stats["in_flight"] -= 1
            stats[outcome] += 1

    async def lifespan(self, receive: Callable, send: Callable) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if not self.ready:
                    asyncio.get_running_loop().call_later(self.load_seconds, self.loaded)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    def loaded(self) -> None:
        self.ready = True
        print(f"bigram_lm: loaded after {self.load_seconds:g} s", file=sys.stderr, flush=True)

    def check_ready(self) -> None:
        if not self.ready:
            raise BadRequest("the model is still loading: retry in a moment", status=503,
                             code="model_loading", kind="service_unavailable",
                             headers=((b"retry-after", b"1"),))

    def model_name(self, body: dict[str, Any]) -> str:
        name = body.get("model")
        if not isinstance(name, str):
            raise BadRequest(f"'model' is required: one of {', '.join(self.names)}", "model")
        if name not in self.names:
            raise BadRequest(f"The model '{name}' does not exist: this server has "
                             f"{', '.join(self.names)}", "model", 404, "model_not_found")
        return name

    def next_id(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}-{self.created:x}{self.serial:08x}"

    # ---- routes ----

    async def health(self, scope: Any, receive: Callable, send: Callable) -> None:
        await send_json(send, 200 if self.ready else 503,
                        {"status": "ok" if self.ready else "loading"})

    async def get_stats(self, scope: Any, receive: Callable, send: Callable) -> None:
        await send_json(send, 200, self.stats)

    def model_card(self, name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": self.created, "owned_by": "rota"}

    async def models(self, scope: Any, receive: Callable, send: Callable) -> None:
        self.check_ready()
        await send_json(send, 200, {"object": "list",
                                    "data": [self.model_card(n) for n in self.names]})

    async def one_model(self, scope: Any, receive: Callable, send: Callable) -> None:
        self.check_ready()
        name = scope["path"][len("/v1/models/"):]
        if name not in self.names:
            raise BadRequest(f"The model '{name}' does not exist: this server has "
                             f"{', '.join(self.names)}", "model", 404, "model_not_found")
        await send_json(send, 200, self.model_card(name))

    async def completions(self, receive: Callable, send: Callable) -> bool:
        return await self.generate(receive, send, chat=False)

    async def chat(self, receive: Callable, send: Callable) -> bool:
        return await self.generate(receive, send, chat=True)

    async def generate(self, receive: Callable, send: Callable, chat: bool) -> bool:
        body = await read_json(receive)
        if body is None:
            return False
        self.check_ready()
        name = self.model_name(body)
        request = Generation(body, chat)
        counter = [0, 0]
        pieces = until_stop(self.model.tokens(request.prompt, request.max_tokens,
                                              request.temperature, request.seed_for(name)),
                            request.stops, counter)
        reply = Reply(self.next_id("chatcmpl" if chat else "cmpl"), name, chat, request, counter)
        if not request.stream and not self.token_delay:
            return await send_json(send, 200, reply.whole("".join(pieces)))
        watch = Watch(receive)
        try:
            if not request.stream:
                text: list[str] = []
                if not await self.paced(pieces, watch, text.append):
                    return False
                return await send_json(send, 200, reply.whole("".join(text)))
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})

            async def emit(piece: str) -> None:
                await send({"type": "http.response.body", "body": reply.event(piece),
                            "more_body": True})

            if chat:
                await send({"type": "http.response.body", "body": reply.role(), "more_body": True})
            if not await self.paced(pieces, watch, emit):
                return False
            await send({"type": "http.response.body", "body": reply.end(), "more_body": False})
            return True
        finally:
            watch.close()

    async def paced(self, pieces: Iterator[str], watch: Watch, emit: Callable) -> bool:
        """Hands each piece to ``emit`` at the model's pace; False if the client went away."""
        for i, piece in enumerate(pieces):
            if self.token_delay:
                await watch.pause(self.token_delay)
            elif i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
            if watch.gone:
                return False
            if piece:
                result = emit(piece)
                if result is not None:
                    await result
        await asyncio.sleep(0)
        return not watch.gone

    async def embeddings(self, receive: Callable, send: Callable) -> bool:
        body = await read_json(receive)
        if body is None:
            return False
        self.check_ready()
        name = self.model_name(body)
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not 0 < len(texts) <= 2048 \
                or not all(isinstance(t, str) and t for t in texts):
            raise BadRequest("'input' must be a non-empty string or a list of 1 to 2048 of them",
                             "input")
        encoding = field(body, "encoding_format", (str,), "float",
                         lambda v: v in ("float", "base64"), "'float' or 'base64'")
        size = self.model.projection.shape[1]
        dimensions = field(body, "dimensions", (int,), size, lambda v: 1 <= v <= size,
                           f"an integer, 1 to {size}")
        data = []
        for i, text in enumerate(texts):
            vector = self.model.embed(text, dimensions)
            value = base64.b64encode(vector.astype("<f4").tobytes()).decode() \
                if encoding == "base64" else vector.tolist()
            data.append({"object": "embedding", "index": i, "embedding": value})
        tokens = sum(map(len, texts))
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return await send_json(send, 200, {"object": "list", "data": data, "model": name,
                                           "usage": usage})


class Reply:
    """The JSON of one completion or chat answer, whole or as server-sent events."""

    def __init__(self, rid: str, model: str, chat: bool, request: Generation,
                 counter: list[int]) -> None:
        self.chat, self.request, self.counter = chat, request, counter
        self.head: dict[str, Any] = {
            "id": rid, "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()), "model": model, "system_fingerprint": None}
        self._event: tuple[bytes, bytes] | None = None

    def usage(self) -> dict[str, int]:
        prompt, generated = len(self.request.prompt), self.counter[0]
        return {"prompt_tokens": prompt, "completion_tokens": generated,
                "total_tokens": prompt + generated}

    def choice(self, text: dict[str, Any] | str, finish: str | None) -> dict[str, Any]:
        """A choice of a completion (``text`` a string) or of a chat (``text`` the message or
        the delta)."""
        key = "text" if not self.chat else "delta" if self.request.stream else "message"
        return {"index": 0, key: text, "logprobs": None, "finish_reason": finish}

    def finish_reason(self) -> str:
        return "stop" if self.counter[1] else "length"

    def whole(self, text: str) -> dict[str, Any]:
        message = {"role": "assistant", "content": text, "refusal": None} if self.chat else text
        return {**self.head, "choices": [self.choice(message, self.finish_reason())],
                "usage": self.usage()}

    def chunk(self, choices: list[dict[str, Any]], usage: dict[str, int] | None) -> bytes:
        value = {**self.head, "choices": choices}
        if self.chat:
            value["object"] = "chat.completion.chunk"
        if self.request.include_usage:
            value["usage"] = usage
        return b"data: %s\n\n" % json.dumps(value, separators=(",", ":")).encode()

    def role(self) -> bytes:
        """The first event of a chat stream: the role, no content yet."""
        return self.chunk([self.choice({"role": "assistant", "content": ""}, None)], None)

    def event(self, piece: str) -> bytes:
        """The event of one piece of text: one template for all of a stream's pieces."""
        if self._event is None:
            mark = "\x00"
            text = {"content": mark} if self.chat else mark
            before, after = self.chunk([self.choice(text, None)], None).split(b'"\\u0000"')
            self._event = before, after
        return self._event[0] + json.dumps(piece).encode() + self._event[1]

    def end(self) -> bytes:
        """The last choice event (its finish reason), the usage event if asked, ``[DONE]``."""
        events = [self.chunk([self.choice({} if self.chat else "", self.finish_reason())], None)]
        if self.request.include_usage:
            events.append(self.chunk([], self.usage()))
        return b"".join(events) + b"data: [DONE]\n\n"


# ---- the command line -------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A toy OpenAI-compatible model server "
                                     "(a character bigram table) for tests and demos.")
    parser.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1")
    parser.add_argument("--port", type=int, help="default: $ROTA_PORT, else 8000")
    parser.add_argument("--model", action="append", dest="models", metavar="NAME",
                        help="a model name to serve (repeatable; default: tiny)")
    parser.add_argument("--load-seconds", type=float, default=0.0, metavar="S",
                        help="pretend loading takes this long: /health answers 503 until then")
    parser.add_argument("--token-delay", type=float, default=0.0, metavar="S",
                        help="seconds per generated token (default 0)")
    parser.add_argument("--embedding-dim", type=int, default=64, metavar="N",
                        help="length of the embedding vectors (default 64)")
    args = parser.parse_args(argv)
    if args.port is None:
        env = os.environ.get("ROTA_PORT", "8000")
        if not env.isdigit():
            parser.error(f"ROTA_PORT must be a port number, got {env!r}")
        args.port = int(env)
    if not 1 <= args.port <= 65535:
        parser.error(f"--port must be 1 to 65535, got {args.port}")
    for name in ("load_seconds", "token_delay"):
        if not 0 <= getattr(args, name) < float("inf"):
            parser.error(f"--{name.replace('_', '-')} must be 0 or more seconds")
    if not 1 <= args.embedding_dim <= 4096:
        parser.error(f"--embedding-dim must be 1 to 4096, got {args.embedding_dim}")
    args.models = list(dict.fromkeys(args.models or ["tiny"]))
    if not all(args.models):
        parser.error("--model needs a non-empty name")
    return args


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    args = parse_args(argv)
    app = Server(BigramModel(CORPUS, args.embedding_dim), args.models, args.load_seconds,
                 args.token_delay)
    print(f"bigram_lm: serving {', '.join(args.models)} on http://{args.host}:{args.port}",
          file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, http="httptools", lifespan="on", ws="none",
                access_log=False, log_level="warning")


if __name__ == "__main__":
    main()
