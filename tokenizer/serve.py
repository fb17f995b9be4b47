"""A tokenizer playground in the browser: ``python -m tokenizer serve``, then open http://127.0.0.1:8000/.

The page (``tokenizer/playground/``: index.html, playground.js, playground.css; no CDN, works offline) shows a
text's tokens as coloured spans, their ids, bytes and GPT-2 ``Ġ`` form; the merges that built a token when it is
clicked; the same text under two or three encodings with the tokens they split differently outlined; and, when
started with a model (``gpt2 --serve``), the next tokens GPT-2 expects. Everything it shows comes from this small
JSON API, which scripts may use too (GET with a query, or POST a JSON object of the same fields):

    GET /api/encodings                                 the encodings on offer, the default, whether a model is on
    GET /api/encode?text=hi%20there&encoding=gpt2      tokens: id, text, bytes, GPT-2 form, byte span; counts
    GET /api/compare?text=...&encodings=gpt2&encodings=o200k_base   each encoding's tokens, those split
                                                       differently marked (the older encodings=gpt2,o200k_base too)
    GET /api/explain?text=...&encoding=gpt2&token=1    the pre-token holding the text's token at index 1 (its
                                                       second: the field counts from 0, as ids[1]), its merges
    GET /api/next?text=...                             GPT-2's 10 likeliest next tokens (gpt2 --serve); "partial"
                                                       marks those holding part of a character, no text to add

``special`` (``allowed``, ``disallowed`` or ``text``) is the special-token rule of :meth:`Encoding.encode`:
special-token text becomes its id (the teaching tools' default, :data:`tokenizer.teach.TEACHING_SPECIAL_RULE`),
is an error (tiktoken's default), or is encoded as plain text. Each merge of the trace is named by its place
among the encoding's merges (``merge``, from 0: for gpt2 merge r is line r + 2 of ``vocab.bpe``, after its
header) and by the id of the token it makes (``id``; tiktoken's encodings also rank merges by it), never by a bare
rank. A mistake
(unknown encoding or field, text over a limit below, a malformed query, a URL over 64 KB, a method other than
GET, POST, HEAD and OPTIONS) is answered with a 4xx or 5xx status and
``{"error": "one line that says what to pass instead"}``. HEAD answers as GET does, without the body; OPTIONS
lists a path's methods in its ``Allow`` header. Each field is given once, but for compare's ``encodings``: one
field per name (a JSON list in a POST), since a saved tokenizer's name is its folder's and may hold a comma. One
``encodings`` field is one name, or names joined by commas where they read only one way (the older form).

The answers are :mod:`tokenizer.teach`'s (pre_tokens, merge_story, token_spans, split_differences): this module
turns HTTP into calls and results into JSON. The next-token panel asks the model it was handed (any object
with ``name``, ``n_ctx`` and ``top(ids, k)``, see :class:`NextTokenModel`) about the text's GPT-2 ids; ``gpt2
--serve --model 124M`` starts the playground with GPT-2's, so this package never imports the model.

It listens on 127.0.0.1 (this machine) unless told otherwise; ``--host 0.0.0.0`` serves a room, sized for one
(:class:`PlaygroundServer`: connections wait in a backlog, never dropped; a few workers compute the answers in
turn, skipping a request whose client closed its connection before a worker took it up, as the page does with
a request a newer one replaced, so a client keeps its sending side open until it has its answer; limits bound
what one request can cost). What it does not do: know who asks. There is no login and no TLS; it reads only
the text each request sends, writes nothing to disk and keeps no state between requests.
"""

from __future__ import annotations

import json
import selectors
import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

from .command_line import ascii_digits, comma_readings
from .encoding import Encoding
from .registry import get_encoding, is_registered, list_encoding_names, shown_names
from .special_advice import refusal_of
from .teach import MAX_EXPLAIN_BYTES  # noqa: F401 - one of the API's limits, all of them read here
from .teach import (COMPARED, SPECIAL_RULES, TEACHING_SPECIAL_RULE, counted, explain_limit, merge_number,
                    merge_story, pre_tokens, show_bytes, split_differences, token_spans, token_texts,
                    visible_whitespace)
from .vocab_files import token_to_gpt2_str

# The limits. An answer's work grows with its text: encode's with the tokens it lists (JSON included), compare's
# with the tokens of every encoding it lists, explain's with the square of the pre-token it replays, next's only
# up to the model's context. Each limit keeps the worst text (one token per byte, as emoji get from gpt2) under
# about a second on one core (docs/performance.md), far above what a room types or pastes by accident, so that
# one request cannot hold a worker (PlaygroundServer) for long; the 413 that says no names the limit.
MAX_CHARS = 20_000  # longest text the API takes (encode, explain, next)
MAX_COMPARE_CHARS = 5_000  # longest text compare takes: it lists the tokens of up to 4 encodings
MAX_BODY = 1_000_000  # bytes of a POST body (20,000 characters of JSON-escaped text fit)
MAX_COMPARED = 4  # encodings one compare lists
# and MAX_EXPLAIN_BYTES, the longest pre-token explain replays: tokenizer.teach's, the explain command's too
TOP_K = 10
LIST_FIELDS = {"encodings"}  # the fields given once per item (repeated in a query, a list in a POST body)
PAGE_DIR = Path(__file__).resolve().parent / "playground"
PAGE_FILES = {  # URL path -> (file in PAGE_DIR, content type); nothing else is served from disk
    "/": ("index.html", "text/html; charset=utf-8"),
    "/playground.js": ("playground.js", "text/javascript; charset=utf-8"),
    "/playground.css": ("playground.css", "text/css; charset=utf-8"),
}


class JsonDigits(str):
    """A whole number of a JSON body, as the digits it is written in (``json.loads``' ``parse_int``)."""


class ApiError(Exception):
    """A request the API cannot answer: sent as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


# ---- the next-token model ---------------------------------------------------------------------------------


class NextTokenModel(Protocol):
    """What the next-token panel needs of a model, handed in by the command that starts the playground (``gpt2
    --serve`` gives :class:`gpt2_numpy.next_tokens.NextTokens`): this package never imports a model."""

    name: str  # shown on the page
    n_ctx: int  # how many of the text's last tokens it reads

    def top(self, ids: list[int], k: int = TOP_K) -> list[tuple[int, float]]:
        """The ``k`` likeliest next token ids after GPT-2's ``ids``, with their probabilities, likeliest first."""


# ---- the API ----------------------------------------------------------------------------------------------


class Playground:
    """The API's answers, without HTTP: ``answer("/api/encode", {"text": "hi"})`` -> a JSON-able dict.

    ``encodings``: saved tokenizers to offer besides the registered encodings, and which comes first in the
    selector (the page's default); ``model``: a :class:`NextTokenModel`, or None for no next-token panel.
    """

    def __init__(self, encodings: list[Encoding] = (), *, model: NextTokenModel | None = None):
        # a saved tokenizer is named after its folder, which may be a registered name or another's: each is
        # offered under a name of its own (shown_names), never hiding (or hidden by) another encoding
        encodings = list(encodings)
        offered = shown_names(encodings)  # the names of ``encodings``, in their order
        self.saved: dict[str, Encoding] = {  # the name on offer -> a saved tokenizer
            name: enc for name, enc in zip(offered, encodings) if not is_registered(enc)}
        self.names = list(dict.fromkeys([*offered, *list_encoding_names()]))
        self.model = model
        self.routes = {  # path -> (handler, the fields it takes)
            "/api/encodings": (self.encodings, set()),
            "/api/encode": (self.encode, {"text", "encoding", "special"}),
            "/api/compare": (self.compare, {"text", "encodings", "special"}),
            "/api/explain": (self.explain, {"text", "encoding", "special", "token"}),
            "/api/next": (self.next_tokens, {"text", "special"}),
        }

    def answer(self, path: str, fields: dict[str, str | list[str]]) -> dict:
        """The answer to ``fields``: each a string, but for :data:`LIST_FIELDS`, a string or a list of them."""
        if path not in self.routes:
            raise ApiError(HTTPStatus.NOT_FOUND, f"no API at {path}; the API is {', '.join(self.routes)}")
        handler, takes = self.routes[path]
        unknown = sorted(set(fields) - takes)
        if unknown:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"{path} takes {', '.join(sorted(takes)) or 'no fields'}; "
                           f"got {', '.join(unknown)}")
        repeated = sorted(name for name, value in fields.items() if isinstance(value, list) and name not in LIST_FIELDS)
        if repeated:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"{', '.join(repeated)} given more than once; give each field once")
        return handler(fields)

    # ---- the fields

    def encoding(self, name: str) -> Encoding:
        if name in self.saved:
            return self.saved[name]
        if name not in self.names:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"unknown encoding {name!r}; pass one of {', '.join(self.names)}")
        return get_encoding(name)

    @staticmethod
    def text(fields, *, limit: int = MAX_CHARS, does: str = "takes", instead: str = "") -> str:
        """The text field, at most ``limit`` characters (else a 413 saying the playground ``does`` at most so
        many, and what to do ``instead``) and valid Unicode."""
        text = fields.get("text", "")
        if len(text) > limit:
            raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"text is {len(text):,} characters; the playground "
                           f"{does} at most {limit:,}: {instead or 'send a shorter text'}")
        bad = next((i for i, ch in enumerate(text) if "\ud800" <= ch <= "\udfff"), None)
        if bad is not None:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"text holds a lone surrogate (U+{ord(text[bad]):04X}) at "
                           f"character {bad}, which is not Unicode text; send valid UTF-8")
        return text

    @staticmethod
    def special(fields) -> dict:
        rule = fields.get("special", TEACHING_SPECIAL_RULE)
        if rule not in SPECIAL_RULES:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"special={rule!r}; pass allowed (special-token text becomes "
                           "its id), disallowed (it is an error) or text (it is plain text)")
        return SPECIAL_RULES[rule]

    def encode_ids(self, text: str, enc: Encoding, rule: dict) -> list[int]:
        try:
            return enc.encode(text, **rule)
        except ValueError as e:  # a disallowed special token: the error keeps the refusal, which names it
            refusal = refusal_of(e)
            if refusal is None:
                raise
            raise ApiError(HTTPStatus.BAD_REQUEST, f"{refusal.place}The text contains the special token "
                           f"{refusal.token!r}, which is disallowed: set special tokens to allowed (it becomes its "
                           "id) or to plain text") from None

    # ---- the answers

    def encodings(self, fields) -> dict:
        return {"encodings": self.names, "default": self.names[0],
                "compare": [name for name, _ in COMPARED], "special_rules": list(SPECIAL_RULES),
                "special_default": TEACHING_SPECIAL_RULE,
                "model": self.model.name if self.model else None, "max_chars": MAX_CHARS,
                "max_compare_chars": MAX_COMPARE_CHARS}

    def encode(self, fields) -> dict:
        text, rule = self.text(fields), self.special(fields)
        name = fields.get("encoding", self.names[0])
        enc = self.encoding(name)
        return tokens_answer(text, name, enc, self.encode_ids(text, enc, rule))

    def compare(self, fields) -> dict:
        text = self.text(fields, limit=MAX_COMPARE_CHARS, does="compares",
                         instead=f"compare a part of it, or encode it alone (up to {MAX_CHARS:,})")
        rule = self.special(fields)
        names = self.compared_names(fields.get("encodings", ""))
        if not 1 <= len(names) <= MAX_COMPARED:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"{len(names)} encodings; compare takes 1 to {MAX_COMPARED}, "
                           "each as a field of its own: encodings=A&encodings=B")
        encs = [self.encoding(name) for name in names]
        answers = [tokens_answer(text, name, enc, self.encode_ids(text, enc, rule)) for name, enc in zip(names, encs)]
        differs = split_differences([[(t["start"], t["end"]) for t in a["tokens"]] for a in answers])
        for answer, marks in zip(answers, differs):
            for token, differ in zip(answer["tokens"], marks):
                token["differs"] = differ
        return {"results": answers}

    def compared_names(self, given: str | list[str]) -> list[str]:
        """The names of the encodings to compare: each item of a list, whole; one string is one name, or names
        joined by commas (the older form) where they read only one way; none, the page's default."""
        if isinstance(given, list):
            return given
        if given in self.names:
            return [given]
        widest = 1 + max((name.count(",") for name in self.names), default=0)  # the most parts one name spans
        readings = comma_readings(given, set(self.names).__contains__, widest=widest)
        if len(readings) > 1:
            shown = sorted(readings, key=len, reverse=True)  # the reading of most names (split at commas) first
            raise ApiError(HTTPStatus.BAD_REQUEST, f"encodings={given!r:.100} reads as "
                           f"{' or as '.join(' | '.join(names) for names in shown)} (a name holds a comma): "
                           "give each name as a field of its own, encodings=A&encodings=B")
        # no reading: an unknown name, which self.encoding() names in its error
        names = readings[0] if readings else [name.strip() for name in given.split(",") if name.strip()]
        return names or [name for name, _ in COMPARED]

    def explain(self, fields) -> dict:
        text, rule = self.text(fields), self.special(fields)
        enc = self.encoding(fields.get("encoding", self.names[0]))
        self.encode_ids(text, enc, rule)  # the rule's error, worded for the page
        given = fields.get("token", "")
        if not ascii_digits(given):  # int() also reads "1_0", " 1", "+1" and other scripts' digits
            raise ApiError(HTTPStatus.BAD_REQUEST, f"token={given!r:.40}; pass the position of a token in the text "
                           "(0 for the first), in the digits 0-9")
        # past MAX_CHARS no text has the token, and int() refuses numbers of over 4,300 digits
        index = int(given) if len(given) <= len(str(MAX_CHARS)) else MAX_CHARS
        first = 0
        for piece in pre_tokens(text, enc, **rule):
            if first <= index < first + len(piece.ids):
                return piece_answer(piece, enc, first, index)
            first += len(piece.ids)
        has = f"{counted(first, 'token')} (0 to {first - 1})" if first else "no tokens"
        raise ApiError(HTTPStatus.BAD_REQUEST, f"token={given:.40}; the text has {has}")

    def next_tokens(self, fields) -> dict:
        if self.model is None:
            raise ApiError(HTTPStatus.NOT_FOUND, "no model loaded; start the playground with gpt2 --serve "
                           "--model 124M (or a model folder) for next-token guesses")
        text, rule = self.text(fields), self.special(fields)
        enc = get_encoding("gpt2")
        ids = self.encode_ids(text, enc, rule)
        # a guess of part of a character (a byte of 我, say) has no text to add: its "text" is U+FFFD, and
        # "partial" says so, so the page does not add a replacement character to the text for it
        guesses = [{**token_answer(enc, i), "text": enc.decode([i]), "partial": not whole_text(enc, i),
                    "probability": p} for i, p in self.model.top(ids)]
        return {"model": self.model.name, "context": min(len(ids), self.model.n_ctx), "tokens": len(ids),
                "next": guesses}


@lru_cache(maxsize=1 << 15)
def token_answer(enc: Encoding, token: int) -> dict:
    """What the page shows of a token id, whatever text holds it. Remembered, since a room's texts share most
    of their tokens: the answer is shared, so copy it before adding to it (``{**token_answer(enc, i), ...}``)."""
    data = enc.decode_single_token_bytes(token)
    special = enc.is_special_token(token)
    # an added token, special or not (Qwen3's <think>), is its own text in a tokenizer.json, not byte-level characters
    return {"id": token, "shown": show_bytes(data), "bytes": data.hex(" "), "special": special,
            "gpt2": data.decode("utf-8") if special or is_added_token(enc, token) else token_to_gpt2_str(data)}


def is_added_token(enc: Encoding, token: int) -> bool:
    """Whether ``token`` is one of the added tokens that are not special of a loaded ``tokenizer.json``."""
    steps = enc.text_steps
    return steps is not None and (token in steps.added_raw.values() or token in steps.added_normalized.values())


def whole_text(enc: Encoding, token: int) -> bool:
    """Whether the token's bytes are whole UTF-8 characters, which text can hold."""
    try:
        enc.decode_single_token_bytes(token).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def tokens_answer(text: str, name: str, enc: Encoding, ids: list[int]) -> dict:
    """The tokens of ``text`` (``ids``) under ``enc``, offered as ``name``."""
    n_bytes = len(text.encode("utf-8"))
    tokens = [{**token_answer(enc, token), "text": token_text, "visible": visible_whitespace(token_text),
               "start": start, "end": end}
              for token, token_text, (start, end) in zip(ids, token_texts(enc, ids), token_spans(enc, ids))]
    count = {"tokens": len(ids), "characters": len(text), "bytes": n_bytes,
             "bytes_per_token": round(n_bytes / len(ids), 3) if ids else None}
    return {"encoding": name, "tokens": tokens, "count": count}


def piece_answer(piece, enc: Encoding, first: int, index: int) -> dict:
    """Token ``index`` of the text, the pre-token holding it (whose first token is ``first``) and its merges."""
    # a tokenizer.json's added token that is not special is cut out as special tokens are, but named apart
    added = piece.special and piece.text not in enc.special_tokens
    answer = {"token": index, "first": first, "pre_token": piece.text, "special": piece.special and not added,
              "added": added, "tokens": [token_answer(enc, i) for i in piece.ids]}
    if piece.special:
        return {**answer, "bytes": piece.text.encode("utf-8").hex(" "), "whole": True, "steps": []}
    data = piece.text.encode("utf-8")
    too_long = explain_limit(piece.text)
    if too_long:
        # (the pre-token is named, not the token's index: the page counts tokens from 1, the field from 0)
        raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"{too_long}; pick a token of a shorter "
                       "pre-token, or explain a shorter text")
    story = merge_story(piece.text, enc)
    steps = [{"merge": merge_number(enc, s.left + s.right), "id": enc.token_ids[s.left + s.right],
              "left": show_bytes(s.left), "right": show_bytes(s.right),
              "result": show_bytes(s.left + s.right), "gpt2": [token_to_gpt2_str(s.left), token_to_gpt2_str(s.right)],
              "builds": built}
             for s, built in zip(story.steps, story.builds)]
    return {**answer, "bytes": data.hex(" "), "whole": story.whole, "steps": steps}


# ---- HTTP -------------------------------------------------------------------------------------------------


API_METHODS = "GET, HEAD, POST, OPTIONS"  # what the API answers (the Allow header's list)
PAGE_METHODS = "GET, HEAD, OPTIONS"  # and the page's files
MAX_REQUEST_LINE = 65_536  # bytes: http.server's limit on "GET /api/encode?text=... HTTP/1.1"


class Handler(BaseHTTPRequestHandler):
    """GET serves the page and the API; POST the API (a JSON object of fields, so long texts fit); HEAD answers
    as GET does, without the body; OPTIONS says which of these a path takes (the Allow header)."""

    server_version = "tokenizer-playground"
    server: PlaygroundServer
    timeout = 30  # seconds a client may stay silent mid-request before its connection is closed

    def do_HEAD(self):
        self.do_GET()  # send() leaves the body out, and only it

    def do_OPTIONS(self):
        path = urlsplit(self.path).path
        if self.path == "*" or path in self.server.playground.routes:
            allowed = API_METHODS
        elif path in PAGE_FILES:
            allowed = PAGE_METHODS
        else:
            self.do_GET()  # the 404 GET gives (JSON for a path under /api/, which names the API's paths)
            return
        self.send_response(HTTPStatus.NO_CONTENT)
        self.send_header("Allow", allowed)
        self.send_header("Cache-Control", "no-store")
        self.end_headers()

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path.startswith("/api/"):
            self.api(url.path, lambda: query_fields(url.query))
        elif url.path in PAGE_FILES:
            name, content_type = PAGE_FILES[url.path]
            self.send(HTTPStatus.OK, (PAGE_DIR / name).read_bytes(), content_type)
        else:
            self.send(HTTPStatus.NOT_FOUND, b"not found: the playground is at /\n", "text/plain; charset=utf-8")

    def do_POST(self):
        self.api(urlsplit(self.path).path, self.body_fields)

    def api(self, path: str, read_fields) -> None:
        try:
            fields = read_fields()  # reading the request stays in this connection's thread: a slow client waits here
        except ApiError as e:
            status, body = e.status, json_body({"error": str(e)})
        else:
            answered = self.server.answer(path, fields, gone=self.client_gone)
            if answered is None:  # the client left while the request waited for a worker: no one to answer
                self.close_connection = True
                return
            status, body = answered
        self.send(status, body, "application/json; charset=utf-8")

    def client_gone(self) -> bool:
        """Whether the client has closed its connection, as the page does when a newer request replaces one
        (typing on, another token clicked). A look at the socket that reads nothing: the end of its stream, or
        a reset; a request sent after this one's end stays unread."""
        try:
            # a selector, not select.select(), which refuses a descriptor past 1,023: a room's connections reach it
            with selectors.DefaultSelector() as selector:
                selector.register(self.connection, selectors.EVENT_READ)
                readable = selector.select(timeout=0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):  # reset by the client, or closed here already
            return True

    def body_fields(self) -> dict[str, str | list[str]]:
        given = self.headers.get("Content-Length")
        if given is None:
            raise ApiError(HTTPStatus.LENGTH_REQUIRED, "POST needs a Content-Length header")
        if not ascii_digits(given.strip()):  # int() takes "-1" (read(-1) waits for the client to close), "1_0"
            raise ApiError(HTTPStatus.BAD_REQUEST, f"Content-Length: {given!r:.40} is not a byte count; send the "
                           "body's length in bytes, in the digits 0-9")
        length = int(given)
        if length > MAX_BODY:
            raise ApiError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body of {length:,} bytes; up to {MAX_BODY:,}")
        try:
            # a whole number kept as its digits (a field's number is read as a query's, its text): int() refuses
            # one of over 4,300 digits, with advice for Python (sys.set_int_max_str_digits) no client can take
            fields = json.loads(self.rfile.read(length).decode("utf-8"), parse_int=JsonDigits)
        # ValueError (UnicodeDecodeError, JSONDecodeError) and RecursionError (arrays nested deeper than the
        # parser recurses) all mean a body this API cannot read
        except (ValueError, RecursionError) as e:
            raise ApiError(HTTPStatus.BAD_REQUEST, f"the body is not UTF-8 JSON ({e}); send a JSON object of "
                           "fields, e.g. {\"text\": \"hi\"}") from None
        if not isinstance(fields, dict):
            raise ApiError(HTTPStatus.BAD_REQUEST, "the body must be a JSON object of fields, e.g. {\"text\": \"hi\"}")
        for name, value in fields.items():
            if isinstance(value, JsonDigits):  # a number where the query has text ({"token": 3}): its digits
                fields[name] = str(value)
            elif isinstance(value, list) and name in LIST_FIELDS:
                odd = ["int" if isinstance(item, JsonDigits) else type(item).__name__ for item in value
                       if type(item) is not str]
                if odd:
                    raise ApiError(HTTPStatus.BAD_REQUEST, f"field {name!r} holds a {odd[0]}; send a list of strings")
            elif not isinstance(value, str):
                raise ApiError(HTTPStatus.BAD_REQUEST, f"field {name!r} is {type(value).__name__}; send a string"
                               + (" or a list of strings" if name in LIST_FIELDS else ""))
        return fields

    def send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals, before a request reaches do_GET or do_POST (a request line over 64 KB, a
        method without a ``do_`` here, a malformed request), answered as the API answers every mistake: JSON, one
        line that says what to send instead, not http.server's HTML page."""
        headers = {"Connection": "close"}  # what is left of a refused request is never read as the next one
        self.close_connection = True
        if code == HTTPStatus.REQUEST_URI_TOO_LONG:
            said = (f"the request line is over {MAX_REQUEST_LINE:,} bytes; send a long text as a POST of a JSON "
                    "object of fields, e.g. {\"text\": \"...\"}, to the same /api/ path")
        elif code == HTTPStatus.NOT_IMPLEMENTED:
            said = f"the playground does not answer {self.command}; use {API_METHODS}"
            headers["Allow"] = API_METHODS
        else:
            said = message or HTTPStatus(code).phrase
        self.send(code, json_body({"error": said}), "application/json; charset=utf-8", headers)

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # a request log would bury the one line that matters: where the page is


def query_fields(query: str) -> dict[str, str | list[str]]:
    """``text=a%20b&encodings=gpt2&encodings=r50k_base`` -> ``{"text": "a b", "encodings": ["gpt2", "r50k_base"]}``:
    a field given more than once is a list (:meth:`Playground.answer` takes one only for :data:`LIST_FIELDS`)."""
    try:
        pairs = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query), errors="strict")
    except ValueError as e:  # a field without "=", or percent-escapes that are not UTF-8
        raise ApiError(HTTPStatus.BAD_REQUEST, f"malformed query ({e}); send name=value pairs joined by &, "
                       "percent-encoded UTF-8") from None
    return {name: values if len(values) > 1 else values[0] for name, values in pairs.items()}


def json_body(answer: dict) -> bytes:
    return json.dumps(answer, ensure_ascii=False).encode("utf-8")


class PlaygroundServer(ThreadingHTTPServer):
    """The playground's HTTP server, sized for a room: ``PlaygroundServer(Playground(), "0.0.0.0", 8000)``.

    Each connection has a thread of its own, which reads the request and writes the answer, so a slow or stuck
    client holds only its thread (and that for at most :attr:`Handler.timeout` seconds of silence). The answers
    themselves are computed by ``workers`` threads, first come first served. They are pure Python, which runs
    one thread at a time (the GIL): a thread per request would not answer sooner, it would only hold every
    answer of the room half-built at once (one of a long text holds tens of MB while it is built), and share
    the processor among them all, so that a long answer waits behind every short one that arrives meanwhile. A
    few workers rather than one keep the processor busy while a worker waits (for the GIL, a model's matrix
    products); the limits (:data:`MAX_CHARS` and the others above) bound how long any one answer holds a worker.
    """

    daemon_threads = True  # a slow request does not keep Ctrl-C waiting
    block_on_close = False  # nor does closing the server wait for a stuck client
    request_queue_size = 1024  # connections the OS holds until accepted (capped by net.core.somaxconn)

    def __init__(self, playground: Playground, host: str = "127.0.0.1", port: int = 8000, *, workers: int = 4):
        self.playground = playground
        self.workers = ThreadPoolExecutor(workers, thread_name_prefix="playground-answer")
        super().__init__((host, port), Handler)

    def answer(self, path: str, fields: dict[str, str | list[str]], *, gone=lambda: False) -> tuple[int, bytes] | None:
        """``(status, JSON body)`` of an API request, computed by one of the workers; None, not computed, if the
        client was ``gone()`` when a worker took it up. Checked then only: a look at a socket is cheap, and an
        answer already begun is at most about a second's work (the limits), which a check between its steps
        would not save."""
        return self.workers.submit(self.compute, path, fields, gone).result()

    def compute(self, path: str, fields: dict[str, str | list[str]], gone=lambda: False) -> tuple[int, bytes] | None:
        if gone():  # a request that waited behind others, and was replaced meanwhile
            return None
        try:
            return HTTPStatus.OK, json_body(self.playground.answer(path, fields))
        except ApiError as e:
            return e.status, json_body({"error": str(e)})
        except Exception as e:  # never a traceback page: the page shows this line
            return HTTPStatus.INTERNAL_SERVER_ERROR, json_body({"error": f"internal error: {type(e).__name__}: {e}"})

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):  # a client that left: nothing to say
            super().handle_error(request, client_address)

    def server_close(self) -> None:
        super().server_close()
        self.workers.shutdown(wait=False, cancel_futures=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"
