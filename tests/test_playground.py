"""The playground (tokenizer/serve.py and its page): the JSON API against Encoding.encode and tiktoken, its 4xx
answers, the next-token panel (gpt2_numpy/next_tokens.py, handed to the playground) against the forward pass,
the serve commands (gpt2-tokenizer serve, gpt2 --serve), and the page itself in headless chromium (Debian's
chromium and chromium-driver, driven by Selenium; nothing is downloaded)."""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
import tiktoken

from conftest import REPO, interrupt, run_command
from gpt2_numpy.model import gpt2
from gpt2_numpy.next_tokens import NextTokens
from tokenizer import Encoding, get_encoding, list_encoding_names, merge_reference
from tokenizer.serve import MAX_CHARS, MAX_COMPARE_CHARS, MAX_EXPLAIN_BYTES, Handler, Playground, PlaygroundServer

SAMPLE = "Not all heroes wear capes.\n    return x  # <|endoftext|> Öffnen 😀 12345"
ENCODINGS = ["gpt2", "cl100k_base", "o200k_base"]
PROG = "python -m tokenizer"


def random_params(seed=0, n_vocab=50257, n_ctx=16, n_embd=16, n_layer=2):
    """Small random float32 weights in picoGPT's tree (the next-token panel needs GPT-2's vocabulary size)."""
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)

    def norm():
        return {"g": (1 + normal(n_embd)).astype(np.float32), "b": normal(n_embd)}

    def dense(nx, nf):
        return {"w": normal(nx, nf), "b": normal(nf)}

    return {"wte": normal(n_vocab, n_embd), "wpe": normal(n_ctx, n_embd), "ln_f": norm(),
            "blocks": [{"ln_1": norm(), "ln_2": norm(),
                        "attn": {"c_attn": dense(n_embd, 3 * n_embd), "c_proj": dense(n_embd, n_embd)},
                        "mlp": {"c_fc": dense(n_embd, 4 * n_embd), "c_proj": dense(4 * n_embd, n_embd)}}
                       for _ in range(n_layer)]}


N_HEAD = 2


@pytest.fixture(scope="module")
def model():
    return NextTokens(random_params(), N_HEAD, name="random")


@pytest.fixture(scope="module")
def playground(model):
    return Playground(model=model)


@pytest.fixture(scope="module")
def server(playground):
    """The playground served from a thread of this process, on a free port."""
    server = PlaygroundServer(playground, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def fetch(server, path: str, body: bytes | None = None, headers=None) -> tuple[int, str, bytes]:
    request = urllib.request.Request(server.url.rstrip("/") + path, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read()


def get_json(server, path: str, status: int = 200) -> dict:
    code, content_type, body = fetch(server, path)
    assert (code, content_type) == (status, "application/json; charset=utf-8"), body
    return json.loads(body)


# ---- the API ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ENCODINGS)
def test_encode_answers_encodes_ids_and_tiktokens(server, name):
    answer = get_json(server, f"/api/encode?text={quote(SAMPLE)}&encoding={name}")
    ids = [t["id"] for t in answer["tokens"]]
    assert ids == get_encoding(name).encode(SAMPLE, allowed_special="all")
    assert ids == tiktoken.get_encoding(name).encode(SAMPLE, allowed_special="all")
    data = SAMPLE.encode()
    assert "".join(t["text"] for t in answer["tokens"]) == SAMPLE
    assert b"".join(bytes.fromhex(t["bytes"]) for t in answer["tokens"]) == data
    assert [data[t["start"] : t["end"]] for t in answer["tokens"]] == [bytes.fromhex(t["bytes"]) for t in
                                                                        answer["tokens"]]
    assert answer["count"] == {"tokens": len(ids), "characters": len(SAMPLE), "bytes": len(data),
                               "bytes_per_token": round(len(data) / len(ids), 3)}
    assert [t["special"] for t in answer["tokens"]].count(True) == 1


def test_post_answers_as_get_does(server):
    body = json.dumps({"text": SAMPLE, "encoding": "cl100k_base"}).encode()
    code, _, answer = fetch(server, "/api/encode", body, {"Content-Type": "application/json"})
    assert code == 200
    assert json.loads(answer) == get_json(server, f"/api/encode?text={quote(SAMPLE)}&encoding=cl100k_base")


def test_gpt2_form_and_visible_whitespace(playground):
    tokens = playground.answer("/api/encode", {"text": " world\n\tx"})["tokens"]
    assert [t["gpt2"] for t in tokens] == ["Ġworld", "Ċ", "ĉ", "x"]
    assert [t["visible"] for t in tokens] == ["·world", "↵\n", "→", "x"]


def test_special_token_rule(playground):
    text = "a<|endoftext|>"
    allowed = playground.answer("/api/encode", {"text": text, "special": "allowed"})["tokens"]
    plain = playground.answer("/api/encode", {"text": text, "special": "text"})["tokens"]
    enc = get_encoding("gpt2")
    assert [t["id"] for t in allowed] == enc.encode(text, allowed_special="all") == [64, 50256]
    assert [t["id"] for t in plain] == enc.encode(text, disallowed_special=()) and len(plain) > 2
    assert allowed[1]["special"] and allowed[1]["gpt2"] == "<|endoftext|>" and not any(t["special"] for t in plain)
    with pytest.raises(Exception, match="<|endoftext|>.*which is disallowed: set special tokens to allowed"):
        playground.answer("/api/encode", {"text": text, "special": "disallowed"})


def test_a_refused_special_token_is_named_whole_whatever_it_spells(model):
    # the message was cut at the first "which is disallowed." in it, which a special token may spell: the token
    # was then cut off ("the special token '<|which is disallowed: set special tokens ...")
    odd = "<|which is disallowed.|>"
    enc = Encoding.from_vocab_merges({i: bytes([i]) for i in range(256)}, [], [odd], name="odd")
    with pytest.raises(Exception) as refused:
        Playground([enc], model=model).answer("/api/encode", {"text": f"a{odd}", "encoding": "odd",
                                                              "special": "disallowed"})
    assert str(refused.value) == (f"The text contains the special token {odd!r}, which is disallowed: set special "
                                  "tokens to allowed (it becomes its id) or to plain text")

@pytest.mark.parametrize("name", ENCODINGS)
def test_explain_every_token_is_its_pre_tokens_and_merge_reference_builds_it(playground, name):
    enc = get_encoding(name)
    ids = enc.encode(SAMPLE, allowed_special="all")
    pieces = []
    for index in range(len(ids)):
        story = playground.answer("/api/explain", {"text": SAMPLE, "encoding": name, "token": str(index)})
        token = story["tokens"][index - story["first"]]
        assert token["id"] == ids[index]
        if story["first"] == index:
            pieces.append(story["pre_token"])
        if story["special"]:
            assert story["steps"] == [] and token["special"]
            continue
        data = story["pre_token"].encode()
        parts = merge_reference(data, enc.merge_ranks)
        assert len(story["steps"]) == len(data) - len(parts)  # merge_reference's own steps, every one
        if not story["whole"]:
            assert [enc.token_ids[p] for p in parts] == [t["id"] for t in story["tokens"]]
        built = [s for s in story["steps"] if s["builds"] == index - story["first"]]
        token_bytes = enc.decode_single_token_bytes(ids[index])
        if len(token_bytes) > 1 and not story["whole"]:  # the last merge that built it made all of it
            assert built[-1]["result"] == repr_bytes(token_bytes)
    assert "".join(pieces) == SAMPLE


def repr_bytes(data: bytes) -> str:
    try:
        return repr(data.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(data)


def test_explain_a_known_word(playground):
    story = playground.answer("/api/explain", {"text": "Not all heroes wear capes.", "token": "4"})
    assert story["pre_token"] == " capes" and story["first"] == 4 and not story["whole"]
    # each merge by its place in vocab.bpe (from 0) and the id of the token it makes, never a bare rank
    assert [(s["merge"], s["id"], s["left"], s["right"], s["result"], s["builds"]) for s in story["steps"]] == [
        (13, 269, "' '", "'c'", "' c'", 0), (18, 274, "'e'", "'s'", "'es'", 1), (243, 499, "'a'", "'p'", "'ap'", 0),
        (1195, 1451, "' c'", "'ap'", "' cap'", 0)]
    assert all("rank" not in step for step in story["steps"])
    whole = playground.answer("/api/explain", {"text": "Not all heroes wear capes.", "token": "2"})
    assert whole["pre_token"] == " heroes" and whole["whole"] and whole["steps"][-1]["result"] == "' heroes'"
    # the same six merges explain prints under tiktoken's shortcut, and OpenAI's bpe() makes
    assert [s["result"] for s in whole["steps"]] == ["'he'", "'es'", "'ro'", "' he'", "' hero'", "' heroes'"]


def test_the_page_starts_with_the_teaching_tools_special_token_rule(playground):
    from tokenizer.teach import TEACHING_SPECIAL_RULE

    info = playground.answer("/api/encodings", {})
    assert info["special_default"] == TEACHING_SPECIAL_RULE == info["special_rules"][0]
    ids = [t["id"] for t in playground.answer("/api/encode", {"text": "a<|endoftext|>"})["tokens"]]
    assert ids == [64, 50256]  # no special field: the same rule as explain's


def test_compare_marks_the_tokens_split_differently(playground):
    text = "        return x  # indented"
    answer = playground.answer("/api/compare", {"text": text, "encodings": "gpt2,cl100k_base,o200k_base"})
    results = answer["results"]
    assert [r["encoding"] for r in results] == ENCODINGS
    spans = [{(t["start"], t["end"]) for t in r["tokens"]} for r in results]
    for n, result in enumerate(results):
        assert [t["id"] for t in result["tokens"]] == tiktoken.get_encoding(result["encoding"]).encode(text)
        for token in result["tokens"]:
            span = (token["start"], token["end"])
            assert token["differs"] == any(span not in other for m, other in enumerate(spans) if m != n)
    assert any(t["differs"] for t in results[0]["tokens"]) and not all(t["differs"] for t in results[0]["tokens"])


def test_next_tokens_are_gpt2s_top_10(playground, model):
    enc = get_encoding("gpt2")
    for text in ["Alan Turing theorized that", "", "x " * 40]:
        ids = enc.encode(text) or [enc.eot_token]
        ids = ids[-model.n_ctx :]  # the context is the last n_ctx tokens
        logits = gpt2(ids, **random_params(), n_head=N_HEAD)[-1].astype(np.float64)
        probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        answer = playground.answer("/api/next", {"text": text})
        assert [g["id"] for g in answer["next"]] == list(np.argsort(-probs, kind="stable")[:10])
        assert np.allclose([g["probability"] for g in answer["next"]], np.sort(probs)[::-1][:10])
        assert answer["context"] == min(len(enc.encode(text)), model.n_ctx)
        assert all(g["text"] == enc.decode([g["id"]]) for g in answer["next"])


def test_next_tokens_want_gpt2s_vocabulary():
    with pytest.raises(ValueError, match="1000 token embeddings, but GPT-2's vocabulary has 50257"):
        NextTokens(random_params(n_vocab=1000), N_HEAD)


@pytest.mark.parametrize(
    "path, status, message",
    [
        ("/api/encode?text=hi&encoding=gpt5", 400, "unknown encoding 'gpt5'; pass one of gpt2, "),
        (f"/api/encode?text={'a' * (MAX_CHARS + 1)}", 413,
         f"text is {MAX_CHARS + 1:,} characters; the playground takes at most {MAX_CHARS:,}: send a shorter text"),
        ("/api/encode?text=%ff", 400, "malformed query"),
        ("/api/encode?text", 400, "malformed query"),
        ("/api/encode?text=a&text=b", 400, "text given more than once"),
        ("/api/encode?txt=a", 400, "/api/encode takes encoding, special, text; got txt"),
        ("/api/encode?text=a&special=maybe", 400, "pass allowed (special-token text becomes its id)"),
        ("/api/encode?text=%3C%7Cendoftext%7C%3E&special=disallowed", 400, "which is disallowed"),
        ("/api/explain?text=hi&token=x", 400, "pass the position of a token"),
        ("/api/explain?text=a%20b%20c%20d%20e%20f%20g%20h%20i%20j%20k&token=1_0", 400,
         "token='1_0'; pass the position of a token in the text (0 for the first), in the digits 0-9"),
        ("/api/explain?text=a%20b&token=%D9%A1", 400, "token='\u0661'; pass the position"),
        ("/api/explain?text=a%20b&token=-1", 400, "token='-1'; pass the position"),
        (f"/api/explain?text=hi&token={'9' * 5000}", 400, f"token={'9' * 40}; the text has 1 token (0 to 0)"),
        ("/api/explain?text=&token=0", 400, "token=0; the text has no tokens"),
        ("/api/explain?text=hi&token=5", 400, "the text has 1 token (0 to 0)"),
        ("/api/explain?text=hi%20you&token=2", 400, "token=2; the text has 2 tokens (0 to 1)"),
        (f"/api/explain?text={'a' * (MAX_EXPLAIN_BYTES + 1)}&token=0", 413,
         f"the pre-token 'aaaaaaaaaaaaaaaaaaaa'... is {MAX_EXPLAIN_BYTES + 1:,} bytes; the merge trace "
         f"replays BPE step by step for pre-tokens up to {MAX_EXPLAIN_BYTES:,} bytes (its work grows with the square "
         "of the length); pick a token of a shorter pre-token, or explain a shorter text"),
        (f"/api/compare?text={'a' * (MAX_COMPARE_CHARS + 1)}", 413,
         f"text is {MAX_COMPARE_CHARS + 1:,} characters; the playground compares at most {MAX_COMPARE_CHARS:,}: "
         f"compare a part of it, or encode it alone (up to {MAX_CHARS:,})"),
        ("/api/compare?text=hi&encodings=gpt2,gpt2,gpt2,gpt2,gpt2", 400, "compare takes 1 to 4"),
        ("/api/tokens", 404, "no API at /api/tokens"),
    ],
)
def test_bad_requests_get_a_json_error(server, path, status, message):
    answer = get_json(server, path, status)
    assert list(answer) == ["error"] and message in answer["error"], answer


@pytest.mark.parametrize(
    "body, message",
    [(b"{not json", "the body is not UTF-8 JSON"), (b"\xff", "the body is not UTF-8 JSON"),
     (b"[1, 2]", "must be a JSON object"), (b'{"text": ["a"]}', "field 'text' is list; send a string"),
     (b'{"text": "\\ud800"}', "lone surrogate (U+D800) at character 0"),
     # json.loads refuses this with RecursionError, not JSONDecodeError
     pytest.param(b"[" * 100_000 + b"]" * 100_000, "the body is not UTF-8 JSON", id="nested-100000-deep")],
)
def test_bad_post_bodies_get_a_json_error(server, body, message):
    code, content_type, answer = fetch(server, "/api/encode", body)
    assert code == 400 and content_type.startswith("application/json") and message in json.loads(answer)["error"]


def test_a_number_in_a_post_body_is_read_as_the_query_reads_its_digits(server):
    # a number of over 4,300 digits hit int()'s limit inside json.loads: "the body is not UTF-8 JSON (Exceeds the
    # limit (4300 digits) ...; use sys.set_int_max_str_digits() ...)", Python's advice, for a body that is JSON;
    # it is the field's digits, answered as a GET of them is
    for digits in ("9" * 5000, "5"):
        code, _, posted = fetch(server, "/api/explain", b'{"text": "hi", "token": ' + digits.encode() + b"}")
        assert (code, json.loads(posted)) == (400, get_json(server, f"/api/explain?text=hi&token={digits}", 400))
    code, _, posted = fetch(server, "/api/explain", b'{"text": "hi there", "token": 1}')
    assert (code, json.loads(posted)) == (200, get_json(server, "/api/explain?text=hi%20there&token=1"))
    code, _, posted = fetch(server, "/api/compare", b'{"text": "hi", "encodings": ["gpt2", ' + b"7" * 5000 + b"]}")
    assert (code, json.loads(posted)) == (400, {"error": "field 'encodings' holds a int; send a list of strings"})

@pytest.mark.parametrize("length", ["-1", "-100", "ten", "1_0", "+2", "\u0661\u0660"])
def test_a_content_length_that_is_not_a_byte_count_is_answered_at_once(server, length):
    # read(-1) would wait for the client to close its end, which, waiting for an answer, it never does;
    # int() would read "1_0" and "\u0661\u0660" (Arabic-Indic digits) as 10 and answer about the first 10 bytes
    with socket.create_connection(server.server_address[:2], timeout=5) as client:
        client.sendall(b"POST /api/encode HTTP/1.1\r\nContent-Length: " + length.encode() + b"\r\n\r\n"
                       b'{"text": "hi"}')
        answer = b""
        while chunk := client.recv(1000):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"400", head
    assert "is not a byte count; send the body's length in bytes, in the digits 0-9" in json.loads(body)["error"]


def test_a_post_without_content_length_is_a_411(server):
    with socket.create_connection(server.server_address[:2], timeout=5) as client:
        client.sendall(b'POST /api/encode HTTP/1.1\r\n\r\n{"text": "hi"}')
        answer = b""
        while chunk := client.recv(1000):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"411" and json.loads(body) == {"error": "POST needs a Content-Length header"}


def test_the_limits_themselves_are_answered(playground):
    compared = playground.answer("/api/compare", {"text": "a " * (MAX_COMPARE_CHARS // 2), "encodings": "gpt2,gpt2"})
    assert [r["count"]["characters"] for r in compared["results"]] == [MAX_COMPARE_CHARS] * 2
    explained = playground.answer("/api/explain", {"text": "a" * MAX_EXPLAIN_BYTES, "token": "0"})
    assert explained["pre_token"] == "a" * MAX_EXPLAIN_BYTES and explained["steps"]
    info = playground.answer("/api/encodings", {})
    assert (info["max_chars"], info["max_compare_chars"]) == (MAX_CHARS, MAX_COMPARE_CHARS)


# ---- a room of clients --------------------------------------------------------------------------------------


def test_a_rooms_connections_wait_in_the_backlog_until_accepted():
    """Connections that arrive together are held by the OS until the server accepts them, not dropped (a dropped
    SYN costs its client 1, 3, 7, ... seconds of retries): 100 at once, while the server accepts none yet."""
    with open("/proc/sys/net/core/somaxconn") if sys.platform == "linux" else io.StringIO("4096") as f:
        assert int(f.read()) >= 128, "the OS caps every listen backlog below a room: raise net.core.somaxconn"
    assert PlaygroundServer.request_queue_size >= 128
    server = PlaygroundServer(Playground(), "127.0.0.1", 0)  # listening, not yet serving
    clients = []
    try:
        for _ in range(100):
            clients.append(socket.create_connection(server.server_address[:2], timeout=0.5))  # a drop: timeout
    finally:
        for client in clients:
            client.close()
        server.server_close()


def test_a_silent_client_holds_only_its_own_connection(server, monkeypatch):
    monkeypatch.setattr(Handler, "timeout", 0.5)
    with socket.create_connection(server.server_address[:2], timeout=10) as silent:
        silent.sendall(b"POST /api/encode HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")  # and then nothing
        start = time.perf_counter()
        assert get_json(server, "/api/encode?text=hi")["count"]["tokens"] == 1  # others are answered meanwhile
        assert time.perf_counter() - start < 5
        assert silent.recv(1000) == b""  # and after Handler.timeout of silence, its connection is closed


@pytest.mark.exhaustive
def test_a_room_of_clients_is_answered_fast_and_none_dropped(monkeypatch):
    """The classroom load of bench/bench_serve.py, against the server in a process of its own on a free port:
    every request answered (a 413 where a limit says no counts as answered), p99 <= 2 s, none over 5 s. Half
    the bench's room (16 clients, not 32; 600 requests, not 2,000), since a CI machine's two cores also run
    the clients and another test: a closed room's latency is its clients times the time per answer, and the
    bench meets the bounds with 32 on a machine left to it (docs/performance.md)."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import bench_serve

    server = bench_serve.ServerProcess(REPO)
    try:
        bench_serve.warm(server.url, timeout=60)
        result = bench_serve.room(server.url, bench_serve.request_mix(600), clients=16, timeout=10)
    finally:
        server.stop()
    assert result["requests"] == 600 and result["errors"] == 0, result
    assert result["p99"] <= 2 and result["max"] <= 5, result


def test_no_model_no_next_tokens():
    with pytest.raises(Exception, match="no model loaded; start the playground with gpt2 --serve --model 124M"):
        Playground().answer("/api/next", {"text": "hi"})


def test_a_failure_inside_is_a_json_500_not_a_traceback(server, monkeypatch):
    def broken(fields):
        raise RuntimeError("boom")

    monkeypatch.setitem(server.playground.routes, "/api/encode", (broken, {"text"}))
    assert get_json(server, "/api/encode?text=hi", 500) == {"error": "internal error: RuntimeError: boom"}


def request(server, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    """``(status, headers, body)`` of one request as a client sends it, whatever its method."""
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=60)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, dict(response.headers), response.read()
    finally:
        connection.close()


def test_head_and_options_are_answered_as_the_api_answers(server):
    # http.server answered both with its HTML 501 page
    for path in ["/api/encode?text=hi", "/", "/playground.js", "/api/encode?text=hi&encoding=gpt5", "/nowhere"]:
        status, headers, body = request(server, "GET", path)
        head_status, head_headers, head_body = request(server, "HEAD", path)
        assert (head_status, head_body) == (status, b"")
        assert {k: v for k, v in head_headers.items() if k != "Date"} == {k: v for k, v in headers.items()
                                                                           if k != "Date"}
        assert int(head_headers["Content-Length"]) == len(body) > 0
    for path, allowed in [("/api/encode", "GET, HEAD, POST, OPTIONS"), ("*", "GET, HEAD, POST, OPTIONS"),
                          ("/", "GET, HEAD, OPTIONS"), ("/playground.css", "GET, HEAD, OPTIONS")]:
        status, headers, body = request(server, "OPTIONS", path)
        assert (status, headers["Allow"], body) == (204, allowed, b"")
    assert request(server, "OPTIONS", "/nowhere")[0] == 404
    status, headers, body = request(server, "OPTIONS", "/api/tokens")
    api = ", ".join(server.playground.routes)
    assert (status, json.loads(body)["error"]) == (404, f"no API at /api/tokens; the API is {api}")


def test_http_servers_own_refusals_are_json(server):
    # a URL over 64 KB, a method without an answer: http.server's HTML pages
    status, headers, body = request(server, "GET", "/api/encode?text=" + "a" * 70_000)
    assert (status, headers["Content-Type"]) == (414, "application/json; charset=utf-8")
    assert json.loads(body) == {"error": 'the request line is over 65,536 bytes; send a long text as a POST of a JSON '
                                         'object of fields, e.g. {"text": "..."}, to the same /api/ path'}
    status, headers, body = request(server, "DELETE", "/api/encode")
    assert (status, headers["Content-Type"], headers["Allow"]) == (501, "application/json; charset=utf-8",
                                                                   "GET, HEAD, POST, OPTIONS")
    assert json.loads(body) == {"error": "the playground does not answer DELETE; use GET, HEAD, POST, OPTIONS"}
    answer = get_json(server, "/api/encode?text=hi")  # the server still answers
    assert answer["count"]["tokens"] == 1


def test_the_page_and_only_the_page_is_served(server):
    code, content_type, page = fetch(server, "/?text=hi")
    assert code == 200 and content_type == "text/html; charset=utf-8"
    assert b'id="tokens"' in page and b'id="count"' in page and b"http" not in page.replace(b"http-equiv", b"")
    for name, kind in [("playground.js", "text/javascript"), ("playground.css", "text/css")]:
        code, content_type, body = fetch(server, f"/{name}")
        assert code == 200 and content_type.startswith(kind) and body
    js = fetch(server, "/playground.js")[2]
    assert b"//cdn" not in js and b"https://" not in js  # offline: nothing fetched from elsewhere
    for path in ["/../serve.py", "/index.html/../../serve.py", "/serve.py", "/playground"]:
        assert fetch(server, path)[0] == 404


def test_encodings_lists_saved_folders_first(tmp_path):
    text = "lowest lower newest widest " * 20
    (tmp_path / "corpus.txt").write_text(text)
    vocab = {i: bytes([i]) for i in range(256)}
    enc = Encoding.from_vocab_merges({**vocab, 256: b"es", 257: b"est"}, [(b"e", b"s"), (b"es", b"t")],
                                     name="tiny")
    playground = Playground([enc])
    info = playground.answer("/api/encodings", {})
    assert info["encodings"][0] == "tiny" and info["default"] == "tiny" and "gpt2" in info["encodings"]
    assert info["model"] is None
    answer = playground.answer("/api/encode", {"text": "newest"})
    assert [t["id"] for t in answer["tokens"]] == enc.encode("newest") and answer["encoding"] == "tiny"


def test_a_saved_tokenizer_named_as_a_registered_encoding_is_served_not_hidden(tmp_path):
    # a tokenizer saved in a folder called cl100k_base is named cl100k_base: it was dropped, and the playground
    # answered with OpenAI's cl100k_base under the name the user picked for their own
    tiny = Encoding.from_vocab_merges({**{i: bytes([i]) for i in range(256)}, 256: b"es", 257: b"est"},
                                      [(b"e", b"s"), (b"es", b"t")], name="cl100k_base")
    other = Encoding.from_vocab_merges({i: bytes([i]) for i in range(256)}, [], name="cl100k_base")
    playground = Playground([tiny, other, tiny, get_encoding("o200k_base"), get_encoding("o200k_base")])
    names = playground.answer("/api/encodings", {})["encodings"]
    assert names[:4] == ["cl100k_base (saved)", "cl100k_base (saved 2)", "o200k_base", "gpt2"]
    assert names.count("cl100k_base") == names.count("o200k_base") == 1  # the registered ones stay on offer
    assert len(names) == len(set(names)) == 2 + len(list_encoding_names())  # each encoding offered once
    for name, enc in [("cl100k_base (saved)", tiny), ("cl100k_base (saved 2)", other),
                      ("cl100k_base", get_encoding("cl100k_base"))]:
        answer = playground.answer("/api/encode", {"text": "newest", "encoding": name})
        assert [t["id"] for t in answer["tokens"]] == enc.encode("newest") and answer["encoding"] == name
    assert Playground([get_encoding("gpt2", core="reference")]).names == list_encoding_names()  # its readable core
    compared = playground.answer("/api/compare", {"text": "newest", "encodings": "cl100k_base (saved),cl100k_base"})
    assert [r["encoding"] for r in compared["results"]] == ["cl100k_base (saved)", "cl100k_base"]
    assert [[t["id"] for t in r["tokens"]] for r in compared["results"]] == [
        tiny.encode("newest"), get_encoding("cl100k_base").encode("newest")]


def test_added_tokens_special_or_not_show_their_text_as_hfs_token_strings(tmp_path):
    # the gpt2 view is the token's string in a tokenizer.json: an added token's is its text, special or not (it
    # showed Qwen3's <think>, which is not special, in byte-level characters: "ĠâĨĴ" for " →")
    import tokenizers

    from tokenizer.loading import load_encoding
    from tokenizer.vocab_files import token_to_gpt2_str

    vocab = {token_to_gpt2_str(bytes([b])): b for b in range(256)}
    added = [{"id": 256 + k, "content": text, "special": special, "normalized": False, "lstrip": False,
              "rstrip": False, "single_word": False} for k, (text, special) in enumerate([(" \u2192", False),
                                                                                          ("<|end|>", True)])]
    level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"version": "1.0", "added_tokens": added, "normalizer": None, "pre_tokenizer": level,
                                "post_processor": None, "decoder": level,
                                "model": {"type": "BPE", "vocab": vocab, "merges": []}}), encoding="utf-8")
    hf = tokenizers.Tokenizer.from_file(str(path))
    answer = Playground([load_encoding(path)]).answer("/api/encode", {"text": "a \u2192 b<|end|>"})
    tokens = answer["tokens"]
    assert [t["id"] for t in tokens] == hf.encode("a \u2192 b<|end|>", add_special_tokens=False).ids
    assert [t["gpt2"] for t in tokens] == [hf.id_to_token(t["id"]) for t in tokens] == [
        "a", " \u2192", "Ġ", "b", "<|end|>"]


def tiny_saved(name: str) -> Encoding:
    """A saved tokenizer named ``name`` (a folder's name), with two merges of its own: es, est."""
    return Encoding.from_vocab_merges({**{i: bytes([i]) for i in range(256)}, 256: b"es", 257: b"est"},
                                      [(b"e", b"s"), (b"es", b"t")], name=name)


@pytest.fixture(scope="module")
def comma_server():
    """A playground offering saved tokenizers whose folder names hold commas, one of them two registered names."""
    playground = Playground([tiny_saved("my,tok"), tiny_saved("gpt2,cl100k_base")])
    server = PlaygroundServer(playground, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def compared_names(server, query: str = "", body: dict | None = None) -> list[str]:
    """The encodings /api/compare answered for "newest", asked with a query or a POST of a JSON object."""
    if body is None:
        answer = get_json(server, f"/api/compare?text=newest&{query}")
    else:
        code, _, data = fetch(server, "/api/compare", json.dumps({"text": "newest", **body}).encode())
        assert code == 200, data
        answer = json.loads(data)
    return [r["encoding"] for r in answer["results"]]


def test_compare_takes_each_name_whole_however_many_commas_it_holds(comma_server):
    """The names to compare were joined with commas and split at every comma: a saved folder called my,tok
    could not be compared (unknown encoding 'my'), and a list of names had no other way to be sent."""
    assert compared_names(comma_server, "encodings=my%2Ctok&encodings=gpt2") == ["my,tok", "gpt2"]
    assert compared_names(comma_server, body={"encodings": ["my,tok", "gpt2"]}) == ["my,tok", "gpt2"]
    assert compared_names(comma_server, body={"encodings": ["gpt2,cl100k_base"]}) == ["gpt2,cl100k_base"]
    answer = comma_server.playground.answer("/api/compare", {"text": "newest", "encodings": ["my,tok", "gpt2"]})
    assert [[t["id"] for t in r["tokens"]] for r in answer["results"]] == [
        tiny_saved("my,tok").encode("newest"), get_encoding("gpt2").encode("newest")]


@pytest.mark.parametrize("joined, names", [
    ("gpt2,o200k_base", ["gpt2", "o200k_base"]),  # the old links' and scripts' form keeps working
    ("gpt2, o200k_base,", ["gpt2", "o200k_base"]),  # spaces around a name and blank items, as before
    ("my,tok", ["my,tok"]),  # one name, whole
    ("gpt2,my,tok", ["gpt2", "my,tok"]),  # the one way to read it
    ("gpt2,cl100k_base", ["gpt2,cl100k_base"]),  # a name given whole is that name
])
def test_compare_still_reads_names_joined_by_commas_where_they_read_one_way(comma_server, joined, names):
    assert compared_names(comma_server, f"encodings={quote(joined)}") == names
    assert compared_names(comma_server, body={"encodings": joined}) == names


@pytest.mark.parametrize("query, status, message", [
    ("encodings=gpt2,cl100k_base,o200k_base", 400,
     "encodings='gpt2,cl100k_base,o200k_base' reads as gpt2 | cl100k_base | o200k_base or as gpt2,cl100k_base | "
     "o200k_base (a name holds a comma): give each name as a field of its own, encodings=A&encodings=B"),
    ("encodings=gpt2,my", 400, "unknown encoding 'my'; pass one of my,tok, gpt2,cl100k_base, gpt2, "),
    ("encodings=gpt2&encodings=my", 400, "unknown encoding 'my'; pass one of "),
    ("encodings=gpt2&encodings=gpt2&encodings=gpt2&encodings=gpt2&encodings=gpt2", 400,
     "5 encodings; compare takes 1 to 4"),
    ("encodings=gpt2&text=a", 400, "text given more than once; give each field once"),
])
def test_compare_says_what_it_cannot_read(comma_server, query, status, message):
    answer = get_json(comma_server, f"/api/compare?text=newest&{query}", status)
    assert list(answer) == ["error"] and answer["error"].startswith(message), answer


def test_only_the_list_of_encodings_to_compare_takes_a_list(comma_server):
    code, _, data = fetch(comma_server, "/api/encode", json.dumps({"text": "hi", "encoding": ["gpt2"]}).encode())
    assert (code, json.loads(data)) == (400, {"error": "field 'encoding' is list; send a string"})
    for odd, kind in [(2, "int"), (None, "NoneType"), (["gpt2"], "list")]:
        body = json.dumps({"text": "hi", "encodings": ["gpt2", odd]}).encode()
        code, _, data = fetch(comma_server, "/api/compare", body)
        assert (code, json.loads(data)) == (400, {"error": f"field 'encodings' holds a {kind}; send a list of strings"})
    code, _, data = fetch(comma_server, "/api/compare", json.dumps({"text": "hi", "encodings": {"a": "b"}}).encode())
    assert (code, json.loads(data)) == (400, {"error": "field 'encodings' is dict; send a string or a list of strings"})


# ---- the serve command ------------------------------------------------------------------------------------


def start_serve(*args, cwd, command=("-m", "tokenizer", "serve"), env=None) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    proc = subprocess.Popen([sys.executable, *command, "--port", "0", *args], cwd=cwd, env=env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    line = proc.stdout.readline()
    assert line.startswith("the tokenizer playground is at http://127.0.0.1:"), (line, proc.communicate())
    return proc, line.split()[5]


GPT2_SERVE = ("-m", "gpt2_numpy", "--serve")  # the installed `gpt2 --serve`


def test_serve_command_serves_then_ctrl_c_is_one_line_and_130(tmp_path):
    saved = tmp_path / "mytok"
    get_encoding("gpt2").save(saved)
    proc, url = start_serve("--encoding", str(saved), cwd=tmp_path)
    try:
        with urllib.request.urlopen(url + "api/encodings", timeout=60) as response:
            info = json.load(response)
        assert info["default"] == "mytok" and info["encodings"][0] == "mytok"
        with urllib.request.urlopen(url + "api/encode?text=hello%20world", timeout=60) as response:
            assert [t["id"] for t in json.load(response)["tokens"]] == [31373, 995]
    finally:
        stdout, stderr = interrupt(proc)
    assert (proc.returncode, stdout, stderr) == (130, "", f"{PROG}: interrupted\n")


def next_tokens_from(url, text):
    with urllib.request.urlopen(url + "api/next?text=" + quote(text), timeout=60) as response:
        answer = json.load(response)
    with urllib.request.urlopen(url + "api/encodings", timeout=60) as response:
        return answer, json.load(response)["model"]


def assert_next_tokens_of(answer, params, text):
    expected = NextTokens(params, 2).top(get_encoding("gpt2").encode(text))
    assert [g["id"] for g in answer["next"]] == [i for i, _ in expected]
    assert np.allclose([g["probability"] for g in answer["next"]], [p for _, p in expected], atol=1e-6)


def test_gpt2_serve_loads_a_checkpoint_folder_for_next_tokens(tmp_path):
    """gpt2 --serve --model DIR: OpenAI's checkpoint format (a tiny one, random weights), handed to the playground."""
    from tiny_checkpoint import write_tiny_checkpoint

    params = write_tiny_checkpoint(tmp_path / "models" / "124M", n_head=2)
    proc, url = start_serve("--model", str(tmp_path / "models" / "124M"), cwd=tmp_path, command=GPT2_SERVE)
    try:
        answer, name = next_tokens_from(url, "The cat sat on")
    finally:
        stdout, stderr = interrupt(proc)
    assert name == "124M" and (proc.returncode, stderr) == (130, "python -m gpt2_numpy: interrupted\n")
    assert_next_tokens_of(answer, params, "The cat sat on")


def test_gpt2_serve_by_size_reads_the_models_folder_not_the_current_one(tmp_path):
    """--model 124M is looked for where every command looks ($GPT2_MODELS_DIR here), never in ./models."""
    from tiny_checkpoint import write_tiny_checkpoint

    params = write_tiny_checkpoint(tmp_path / "chosen" / "124M", n_head=2, seed=1)
    elsewhere = tmp_path / "elsewhere"
    write_tiny_checkpoint(elsewhere / "models" / "124M", n_head=2, seed=2)  # a decoy in the current folder
    proc, url = start_serve("--model", "124M", cwd=elsewhere, command=GPT2_SERVE,
                            env={"GPT2_MODELS_DIR": str(tmp_path / "chosen")})
    try:
        answer, _ = next_tokens_from(url, "The cat sat on")
    finally:
        interrupt(proc)
    assert_next_tokens_of(answer, params, "The cat sat on")


def test_the_tokenizer_never_imports_the_model():
    """Data flows text -> tokenizer -> ids -> model: no module of tokenizer/ imports the model's modules."""
    import ast

    model_side = {"gpt2_numpy", "gpt2", "utils", "encoder", "kvcache", "hfmodel", "tfcheckpoint", "crc32c"}
    for path in sorted((REPO / "tokenizer").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not {name.split(".")[0] for name in names} & model_side, (path, names)


def gpt2_command(args, *, cwd, own_process: bool) -> subprocess.CompletedProcess:
    """``python -m gpt2_numpy *args`` in ``cwd``: in its own process, or its ``main`` in this one (stdout and stderr
    caught as bytes; an exit of argparse's is its status)."""
    if own_process:
        return subprocess.run([sys.executable, "-m", "gpt2_numpy", *args], cwd=cwd, capture_output=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    from contextlib import redirect_stderr, redirect_stdout

    from gpt2_numpy.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            status = main(list(args), prog="python -m gpt2_numpy")
        except SystemExit as e:
            status = e.code
    return subprocess.CompletedProcess(list(args), status, out.getvalue().encode(), err.getvalue().encode())


@pytest.mark.parametrize("process", ["in_process", "own_process"])  # own_process: the exhaustive tier
def test_serve_mistakes_are_one_line_and_exit_2(tmp_path, process):
    own_process = process == "own_process"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for command, args, message in [
            ("tokenizer", ["--port", str(port)],
             f"cannot listen on 127.0.0.1:{port} (Address already in use); pass another --port, or --port 0"),
            ("tokenizer", ["--port", "70000"], "expected a port from 0 to 65535"),
            ("tokenizer", ["--encoding", "gpt5"], "Unknown encoding"),
            ("tokenizer", ["--encoding", "no/such/dir"], "no/such/dir: no such file or folder"),
            ("tokenizer", ["--model", "124M"],
             "the next-token panel is started by the model's command: gpt2 --serve --model 124M"),
            ("gpt2_numpy", ["--model", "7B"], "--model '7B' is neither a GPT-2 size (124M, 355M, 774M, 1558M)"),
            ("gpt2_numpy", ["--port", "70000"], "expected a port from 0 to 65535"),
        ]:
            if command == "tokenizer":
                result = run_command(["serve", *args], cwd=tmp_path, own_process=own_process)
            else:
                result = gpt2_command([*GPT2_SERVE[2:], *args], cwd=tmp_path, own_process=own_process)
            stderr = result.stderr.decode()
            assert result.returncode == 2 and stderr.count("\n") == 1, stderr
            assert stderr.startswith(f"python -m {command}") and message in stderr, stderr


# ---- the page in a real browser ---------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1280,900"]


@pytest.fixture(scope="module")
def browser():
    """Headless Debian chromium through chromium-driver; Selenium is told where both are and to fetch nothing."""
    if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()):
        pytest.skip("needs Debian's chromium and chromium-driver: apt-get install -y chromium chromium-driver")
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not download a browser or a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="playground-chromium-")
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def wait_for(check, timeout=30.0):
    """Poll ``check()`` until it returns something true (the page updates after its requests come back)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except Exception:  # an element replaced while being read: try again
            value = None
        if value or time.monotonic() > deadline:
            assert value, f"timed out waiting for {check.__doc__ or check}"
            return value
        time.sleep(0.05)


def span_ids(browser, where="#tokens") -> list[int]:
    return [int(e.get_attribute("data-token-id")) for e in browser.find_elements("css selector",
                                                                                 f"{where} [data-token-id]")]


def page_shows(browser, text: str, name: str) -> bool:
    """The token spans are this text's under this encoding (by Encoding.encode and by tiktoken)."""
    ids = get_encoding(name).encode(text, allowed_special="all")
    assert ids == tiktoken.get_encoding(name).encode(text, allowed_special="all")
    return span_ids(browser) == ids and browser.find_element("id", "tokens").get_attribute("data-encoding") == name


def select(browser, element_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", element_id)).select_by_value(value)


def test_type_text_switch_encodings_and_read_the_counts(browser, server):
    browser.get(server.url)
    box = browser.find_element("id", "text")
    wait_for(lambda: browser.find_element("id", "encoding").get_attribute("value") == "gpt2")
    typed = SAMPLE.replace(" 😀", "")  # chromedriver types only characters of the BMP
    box.send_keys(typed)
    wait_for(lambda: page_shows(browser, typed, "gpt2"))
    n = len(get_encoding("gpt2").encode(typed, allowed_special="all"))
    count = browser.find_element("id", "count").text
    assert count.startswith(f"{n} tokens · {len(typed)} characters · {len(typed.encode())} bytes")
    for name in ["cl100k_base", "o200k_base", "gpt2"]:
        select(browser, "encoding", name)
        wait_for(lambda: page_shows(browser, typed, name))
    # the URL follows, so the view can be shared as a link
    assert f"encoding=gpt2" in browser.current_url and "text=Not+all+heroes" in browser.current_url
    # whitespace is visible; the special token is drawn apart
    texts = [e.text for e in browser.find_elements("css selector", "#tokens [data-token-id]")]
    assert "·heroes" in texts and "↵" in texts
    special = browser.find_elements("css selector", "#tokens .special")
    assert [e.get_attribute("data-token-id") for e in special] == ["50256"]


def test_the_page_says_1_token_1_byte_and_1_merge_in_the_singular(browser, server):
    """The page said "1 tokens · 1 characters · 1 bytes", "1 tokens, 0 split differently" and "1 of the
    pre-token's 1 merges" (the API's counts, written after them as plurals): a count of 1 takes the singular,
    as show's line does; and the merge trace's note says which line of vocab.bpe a merge number is."""
    browser.get(server.url + "?text=a&compare=cl100k_base")
    wait_for(lambda: page_shows(browser, "a", "gpt2"))
    assert browser.find_element("id", "count").text.startswith("1 token · 1 character · 1 byte · ")
    rows = wait_for(lambda: browser.find_elements("css selector", "#compare-rows .compare-row"))
    assert rows and all("1 token, 0 split differently" in row.text for row in rows)
    browser.get(server.url + "?text=" + quote("a a"))
    wait_for(lambda: page_shows(browser, "a a", "gpt2"))
    browser.find_elements("css selector", "#tokens [data-token-id]")[1].click()  # ' a': merge #1, ' ' + 'a'
    trace = wait_for(lambda: (lambda text: "pre-token's" in text and text)(
        browser.find_element("id", "merge-trace").text))
    assert "1 of the pre-token's 1 merge built this token" in trace
    assert "merge #r is line r + 2 of vocab.bpe" in trace
    assert "2 tokens · 3 characters · 3 bytes · " in browser.find_element("id", "count").text


def test_click_a_token_to_read_its_merges(browser, server):
    browser.get(server.url + "?text=" + quote("Not all heroes wear capes."))
    wait_for(lambda: page_shows(browser, "Not all heroes wear capes.", "gpt2"))
    browser.find_elements("css selector", "#tokens [data-token-id]")[4].click()  # ' cap'
    rows = wait_for(lambda: browser.find_elements("css selector", "#merge-steps tr[data-merge]"))
    cells = [[td.text for td in row.find_elements("tag name", "td")] for row in rows]
    assert cells == [["1", "' ' + 'c'", "' c'", "13", "269"], ["2", "'e' + 's'", "'es'", "18", "274"],
                     ["3", "'a' + 'p'", "'ap'", "243", "499"], ["4", "' c' + 'ap'", "' cap'", "1195", "1451"]]
    assert [row.get_attribute("class") for row in rows] == ["builds", "other", "builds", "builds"]
    trace = browser.find_element("id", "merge-trace").text
    assert "Token 5: id 1451, ' cap'" in trace and "3 of the pre-token's 4 merges built this token" in trace
    # one counting rule with explain's steps (and its table, whose first step is 1 as here): from 1, and said
    assert "Tokens count from 1, as merge steps do: token 5 is the text's 5th token (ids[4] in Python" in trace
    clicked = browser.find_elements("css selector", "#tokens [data-token-id]")[4]
    assert clicked.get_attribute("title").startswith("token 5: id 1451")
    browser.find_elements("css selector", "#tokens [data-token-id]")[2].click()  # ' heroes', a token itself
    wait_for(lambda: "' heroes'" in browser.find_element("id", "merge-trace").text)
    trace = browser.find_element("id", "merge-trace").text
    assert "itself a token, so encode takes it whole" in trace and "the merges OpenAI's bpe() makes" in trace
    assert len(browser.find_elements("css selector", "#merge-steps tr[data-merge]")) == 6


def test_a_shared_link_opens_the_same_view(browser, server):
    text = "Öffnen 😀 <|endoftext|> done"
    browser.get(server.url + f"?text={quote(text)}&encoding=o200k_base&view=ids&special=text"
                f"&compare=cl100k_base,gpt2")
    wait_for(lambda: span_ids(browser) == get_encoding("o200k_base").encode(text, disallowed_special=()))
    assert tiktoken.get_encoding("o200k_base").encode(text, disallowed_special=()) == span_ids(browser)
    assert browser.find_element("id", "text").get_attribute("value") == text
    assert [e.text for e in browser.find_elements("css selector", "#tokens [data-token-id]")] == [
        str(i) for i in span_ids(browser)]
    assert not browser.find_elements("css selector", "#tokens .special")  # special text is plain text here
    rows = wait_for(lambda: browser.find_elements("css selector", "#compare-rows .compare-row"))
    assert [row.get_attribute("data-encoding") for row in rows] == ["o200k_base", "cl100k_base", "gpt2"]
    for row in rows:
        name = row.get_attribute("data-encoding")
        ids = [int(e.get_attribute("data-token-id")) for e in row.find_elements("css selector", "[data-token-id]")]
        assert ids == tiktoken.get_encoding(name).encode(text, disallowed_special=())
    assert browser.find_elements("css selector", "#compare-rows .differs")


def test_special_token_switch_and_errors_are_shown(browser, server):
    browser.get(server.url + "?text=" + quote("a<|endoftext|>b"))
    wait_for(lambda: span_ids(browser) == [64, 50256, 65])
    select(browser, "special", "disallowed")
    error = wait_for(lambda: browser.find_element("id", "error").text)
    assert "which is disallowed: set special tokens to allowed" in error and not span_ids(browser)
    assert "tiktoken's default" in browser.find_element("id", "rule").text
    select(browser, "special", "text")
    wait_for(lambda: span_ids(browser) == get_encoding("gpt2").encode("a<|endoftext|>b", disallowed_special=()))
    assert not browser.find_element("id", "error").is_displayed() and "special=text" in browser.current_url
    browser.get(server.url + "?text=" + "a" * (MAX_CHARS + 1))
    assert "the playground takes at most" in wait_for(lambda: browser.find_element("id", "error").text)


def test_views_show_ids_bytes_and_the_gpt2_form(browser, server):
    browser.get(server.url + "?text=" + quote("hello world"))
    wait_for(lambda: span_ids(browser) == [31373, 995])
    shown = {}
    for view in ["ids", "bytes", "gpt2", "text"]:
        browser.find_element("css selector", f'input[name="view"][value="{view}"]').click()
        shown[view] = wait_for(lambda: [e.text for e in browser.find_elements("css selector", "#tokens .token")]
                               if f"view-{view}" in browser.find_element("id", "tokens").get_attribute("class")
                               else None)
    assert shown == {"ids": ["31373", "995"], "bytes": ["68 65 6c 6c 6f", "20 77 6f 72 6c 64"],
                     "gpt2": ["hello", "Ġworld"], "text": ["hello", "·world"]}


def test_next_token_panel(browser, server, model):
    browser.get(server.url + "?text=" + quote("The cat sat on the"))
    wait_for(lambda: browser.find_element("id", "next").is_displayed())
    items = wait_for(lambda: browser.find_elements("css selector", "#next-tokens li"))
    ids = get_encoding("gpt2").encode("The cat sat on the")
    assert [int(e.get_attribute("data-token-id")) for e in items] == [i for i, _ in model.top(ids)]


def test_screenshot(browser, tmp_path):
    """A picture of the page, for a person to look at when it changes (PLAYGROUND_SCREENSHOT=docs/playground.png
    writes the README's). Served without a model: random weights would only show noise as next tokens."""
    text = "Not all heroes wear capes.\n    return x  # <|endoftext|> Öffnen 😀"
    server = PlaygroundServer(Playground(), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        browser.set_window_size(1200, 940)
        browser.get(server.url + f"?text={quote(text)}&compare=cl100k_base,o200k_base")
        wait_for(lambda: page_shows(browser, text, "gpt2")
                 and browser.find_elements("css selector", "#compare-rows .compare-row"))
        browser.find_elements("css selector", "#tokens [data-token-id]")[4].click()
        wait_for(lambda: browser.find_elements("css selector", "#merge-steps tr[data-merge]"))
        assert not browser.find_element("id", "next").is_displayed()
        path = Path(os.environ.get("PLAYGROUND_SCREENSHOT") or tmp_path / "playground.png")
        png = browser.get_screenshot_as_png()
    finally:
        browser.set_window_size(1280, 900)
        server.shutdown()
        server.server_close()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000  # a drawn page, not a blank one
    path.write_bytes(with_png_text(png, SCREENSHOT_KEY, page_digest()))  # which page it shows
    assert png_texts(path.read_bytes())[SCREENSHOT_KEY] == page_digest()


# The README's picture of the page (docs/playground.png) records which page it shows: a digest of the page's
# files, in a text chunk of the PNG. It showed a merge trace of "# rank pair result" long after the page had
# come to show "step pair result merge # token id".
SCREENSHOT_KEY = "playground-page-sha256"
PAGE_FILES = ["index.html", "playground.js", "playground.css"]


def page_digest() -> str:
    digest = hashlib.sha256()
    for name in PAGE_FILES:
        digest.update((REPO / "tokenizer" / "playground" / name).read_bytes())
    return digest.hexdigest()


def png_chunks(png: bytes):
    """``(kind, data)`` of each chunk of a PNG file, in order."""
    at = 8  # past the signature
    while at < len(png):
        length = int.from_bytes(png[at : at + 4], "big")
        yield png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        at += 12 + length  # length, kind, data, CRC


def png_texts(png: bytes) -> dict[str, str]:
    """The PNG's tEXt chunks: keyword -> text."""
    return dict(data.decode("latin-1").split("\0", 1) for kind, data in png_chunks(png) if kind == b"tEXt")


def with_png_text(png: bytes, key: str, text: str) -> bytes:
    """The PNG with a tEXt chunk ``key`` = ``text`` right after its header chunk (IHDR, 25 bytes in all)."""
    data = b"tEXt" + key.encode("latin-1") + b"\0" + text.encode("latin-1")
    chunk = (len(data) - 4).to_bytes(4, "big") + data + zlib.crc32(data).to_bytes(4, "big")
    return png[:33] + chunk + png[33:]


def test_the_readmes_screenshot_is_of_the_page_as_it_is():
    shown = png_texts((REPO / "docs" / "playground.png").read_bytes()).get(SCREENSHOT_KEY)
    assert shown == page_digest(), (
        "docs/playground.png is a picture of another version of the page: take it again with "
        "PLAYGROUND_SCREENSHOT=docs/playground.png python -m pytest tests/test_playground.py -k test_screenshot "
        "-m exhaustive, look at it, and commit it")


def test_a_text_too_long_to_compare_keeps_its_tokens(browser, server):
    """Compare takes 5,000 characters, encode 20,000: a text between keeps its tokens, count and next tokens;
    the compare panel says why it has no rows (the page drew nothing but the error line)."""
    text = "hello " * (MAX_COMPARE_CHARS // 5)
    browser.get(server.url + f"?text={quote(text)}&compare=cl100k_base")
    wait_for(lambda: page_shows(browser, text, "gpt2"))
    n = len(get_encoding("gpt2").encode(text))
    assert browser.find_element("id", "count").text.startswith(f"{n} tokens · {len(text)} characters")
    said = wait_for(lambda: browser.find_element("css selector", "#compare-rows .panel-error").text)
    assert said.startswith(f"text is {len(text):,} characters; the playground compares at most")
    assert not browser.find_element("id", "error").is_displayed()
    wait_for(lambda: len(browser.find_elements("css selector", "#next-tokens li[data-token-id]")) == 10)


def test_a_link_comparing_with_one_encoding_opens_with_one(browser, server):
    # the second compare selector kept its default (o200k_base): a third row, and the link rewritten to name it
    browser.get(server.url + "?text=hi%20there&compare=cl100k_base")
    rows = wait_for(lambda: browser.find_elements("css selector", "#compare-rows .compare-row"))
    assert [row.get_attribute("data-encoding") for row in rows] == ["gpt2", "cl100k_base"]
    assert browser.current_url.endswith("compare=cl100k_base")


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base"])
def test_every_token_is_drawn_with_a_width_of_its_own_in_text_order(browser, server, name):
    """A token that starts with a combining mark (e + U+0301, a variation selector) was drawn onto the token
    before, and one of a format character (zero-width joiner and space, byte order mark) as nothing: spans of no
    width, unseen and unclickable. A right-to-left override reversed the order of the tokens after it."""
    text = "e\u0301 ka\u0915\u093f x\u200dy \u2764\ufe0f a\u200bb \ufeffc d\u202e123 456 end"
    browser.get(server.url + f"?text={quote(text)}&encoding={name}")
    wait_for(lambda: page_shows(browser, text, name))
    # each span's first box (a span that wraps has one more on the next line): [top, left, width]
    boxes = browser.execute_script("return [...document.querySelectorAll('#tokens .token')].map((span) => {"
                                   "const box = span.getClientRects()[0]; return [box.top, box.left, box.width]})")
    assert all(width > 1 for _, _, width in boxes), boxes
    assert sorted(boxes) == boxes  # left to right, line by line
    labels = [e.text for e in browser.find_elements("css selector", "#tokens .token")]
    assert "\\u202e" in "".join(labels) and "\u202e" not in "".join(labels)
    assert any(label.startswith("\u25cc\u0301") for label in labels)


def test_a_paste_over_the_limit_is_kept_whole_and_the_limit_is_said(browser, server):
    """The text box's maxlength (the API's limit) cut a longer paste to its first 20,000 UTF-16 units without a
    word, and took only 10,000 emoji, which the API counts as 10,000 of its 20,000 characters."""
    browser.get(server.url)
    box = wait_for(lambda: browser.find_element("id", "text"))
    wait_for(lambda: browser.execute_script("return document.body.dataset.ready"))
    box.click()
    emoji = "\U0001f600" * (MAX_CHARS // 2 + 1)
    browser.execute_cdp_cmd("Input.insertText", {"text": emoji})  # as a paste puts text in
    n = len(get_encoding("gpt2").encode(emoji))
    wait_for(lambda: browser.find_element("id", "count").text.startswith(f"{n} tokens · {len(emoji)} characters"))
    assert browser.execute_script("return [...document.getElementById('text').value].length") == len(emoji)
    browser.execute_cdp_cmd("Input.insertText", {"text": "a" * MAX_CHARS})
    error = wait_for(lambda: browser.find_element("id", "error").text)
    assert error == (f"text is {len(emoji) + MAX_CHARS:,} characters; the playground takes at most {MAX_CHARS:,}: "
                     "send a shorter text")
    assert browser.execute_script("return [...document.getElementById('text').value].length") == len(emoji) + MAX_CHARS


def test_the_keyboard_reaches_the_tokens_and_the_next_token_guesses(browser, server, model):
    """Tab from the text box went past the tokens and the next-token guesses (spans and list items, never
    focusable) to the end of the page: no merge trace and no guess without a mouse."""
    from selenium.webdriver.common.keys import Keys

    text = "Not all heroes wear capes."
    browser.get(server.url + "?text=" + quote(text))
    wait_for(lambda: page_shows(browser, text, "gpt2")
             and browser.find_elements("css selector", "#next-tokens li[data-token-id]"))
    box = browser.find_element("id", "text")
    box.send_keys(Keys.TAB)
    assert browser.switch_to.active_element.get_attribute("data-index") == "0"
    for _ in range(4):
        browser.switch_to.active_element.send_keys(Keys.ARROW_RIGHT)
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    wait_for(lambda: "Token 5: id 1451, ' cap'" in browser.find_element("id", "merge-trace").text)
    browser.switch_to.active_element.send_keys(Keys.TAB)  # the tokens are one stop: on to the first guess
    first = browser.find_element("css selector", "#next-tokens li[data-token-id]")
    assert browser.switch_to.active_element == first.find_element("tag name", "button")
    guessed = get_encoding("gpt2").decode([int(first.get_attribute("data-token-id"))])
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    wait_for(lambda: browser.find_element("id", "text").get_attribute("value") == text + guessed)


def test_a_text_too_long_for_a_link_leaves_the_link_and_the_page_opens_again(browser, server):
    """The page wrote every text into its address: 10,000 CJK characters are 90,000 bytes of percent-escapes,
    over the server's 64 KB request line, so a reload answered with the JSON 414 instead of the page."""
    browser.get(server.url + "?view=ids")
    wait_for(lambda: browser.execute_script("return document.body.dataset.ready"))
    text = "\u4f60\u597d" * 5_000
    browser.execute_script("const box = document.getElementById('text'); box.value = arguments[0];"
                           "box.dispatchEvent(new Event('input'));", text)
    wait_for(lambda: browser.find_element("id", "count").text.startswith(
        f"{len(get_encoding('gpt2').encode(text))} tokens"))
    assert "text=" not in browser.current_url and "view=ids" in browser.current_url
    assert browser.find_element("id", "link-note").is_displayed()
    browser.refresh()
    wait_for(lambda: browser.find_element("id", "text") and browser.execute_script(
        "return document.body.dataset.ready"))
    assert not browser.find_element("id", "link-note").is_displayed()
    assert browser.find_element("css selector", 'input[name="view"][value="ids"]').is_selected()
    browser.find_element("id", "text").send_keys("hi")
    wait_for(lambda: "text=hi&" in browser.current_url)  # a short text is kept in the link again


class PartialGuesses:
    """A next-token model that guesses the first byte of 我 (part of a character), then ' the'."""

    name, n_ctx = "partial", 16

    def top(self, ids, k=10):
        enc = get_encoding("gpt2")
        return [(enc.encode_single_token(b"\xe6"), 0.6), (enc.encode_single_token(b" the"), 0.4)]


def test_a_next_token_guess_of_part_of_a_character_is_marked_partial():
    answer = Playground(model=PartialGuesses()).answer("/api/next", {"text": "hi"})
    assert [(g["shown"], g["text"], g["partial"]) for g in answer["next"]] == [
        ("b'\\xe6'", "\ufffd", True), ("' the'", " the", False)]


class SpecialGuesses:
    """A next-token model that guesses <|endoftext|>, then ' the'."""

    name, n_ctx = "special", 16

    def top(self, ids, k=10):
        return [(50256, 0.6), (262, 0.4)]


def test_a_special_token_guess_is_added_only_where_its_text_becomes_it(browser):
    """With special tokens as plain text, the guess <|endoftext|> added its text, which the page then encoded as
    seven ordinary tokens, not the token guessed (and with them disallowed, as an error)."""
    server = PlaygroundServer(Playground(model=SpecialGuesses()), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for rule, enabled in [("text", [False, True]), ("disallowed", [False, True]), ("allowed", [True, True])]:
            browser.get(server.url + f"?text=hi&special={rule}")
            items = wait_for(lambda: browser.find_elements("css selector", "#next-tokens li[data-token-id]"))
            assert [item.find_element("tag name", "button").is_enabled() for item in items] == enabled, rule
        items[0].find_element("tag name", "button").click()
        wait_for(lambda: span_ids(browser) == [5303, 50256])
    finally:
        server.shutdown()
        server.server_close()


def test_a_guess_of_part_of_a_character_adds_no_replacement_character(browser):
    """Clicking a guess added its decoded text to the text box: for a byte of a character, U+FFFD, a token the
    model never guessed."""
    server = PlaygroundServer(Playground(model=PartialGuesses()), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        browser.get(server.url + "?text=hi")
        items = wait_for(lambda: browser.find_elements("css selector", "#next-tokens li[data-token-id]"))
        buttons = [item.find_element("tag name", "button") for item in items]
        assert [button.is_enabled() for button in buttons] == [False, True]
        buttons[0].click()
        buttons[1].click()
        wait_for(lambda: browser.find_element("id", "text").get_attribute("value") == "hi the")
    finally:
        server.shutdown()
        server.server_close()


def test_an_error_leaves_no_panel_of_the_text_before(browser, server):
    """A text the encode refuses cleared the tokens, but the merge trace and the next tokens of the text before
    stayed on the page, as if of this one."""
    browser.get(server.url + "?text=" + quote("capes<|endoftext|>"))
    wait_for(lambda: span_ids(browser) == get_encoding("gpt2").encode("capes<|endoftext|>", allowed_special="all")
             and browser.find_elements("css selector", "#next-tokens li[data-token-id]"))
    browser.find_elements("css selector", "#tokens [data-token-id]")[0].click()
    wait_for(lambda: browser.find_elements("css selector", "#merge-steps tr[data-merge]"))
    select(browser, "special", "disallowed")
    wait_for(lambda: browser.find_element("id", "error").text)
    assert not browser.find_elements("css selector", "#next-tokens li")
    assert not browser.find_elements("css selector", "#merge-steps")
    assert browser.find_element("id", "model-name").text == ""


def test_a_merge_trace_answered_late_is_dropped_when_the_text_changed(browser, server):
    """An explain answer that came back after the text changed (or after another token was clicked) was drawn:
    the merge trace of a token of the text before, under the new text's tokens."""
    browser.get(server.url + "?text=" + quote("Not all heroes wear capes."))
    wait_for(lambda: page_shows(browser, "Not all heroes wear capes.", "gpt2"))
    browser.execute_script("""const fetchNow = window.fetch;  // the answers explaining token 4 arrive a second late
        window.fetch = async (path, init) => {
          const response = await fetchNow(path, init);
          if (String(path).includes('/api/explain') && init.body.includes('"token":4')) {
            await new Promise((done) => setTimeout(done, 1000));
          }
          return response;
        };""")
    browser.find_elements("css selector", "#tokens [data-token-id]")[4].click()
    browser.find_element("id", "text").send_keys(" More.")
    wait_for(lambda: page_shows(browser, "Not all heroes wear capes. More.", "gpt2"))
    time.sleep(1.5)
    assert not browser.find_elements("css selector", "#merge-steps")
    browser.find_elements("css selector", "#tokens [data-token-id]")[4].click()  # ' cap', late
    browser.find_elements("css selector", "#tokens [data-token-id]")[2].click()  # then ' heroes', at once
    wait_for(lambda: "Token 3:" in browser.find_element("id", "merge-trace").text)
    time.sleep(1.5)
    assert "Token 3:" in browser.find_element("id", "merge-trace").text


def test_a_links_mistakes_are_said_on_the_page(browser, server):
    """readUrl wrote "unknown encoding ... in the link" to the error line, and the first update, a success,
    cleared it at once: the page silently showed gpt2. An unknown view was not said at all."""
    browser.get(server.url + "?text=hi&encoding=gpt5&view=tokens&compare=gpt2,o300k")
    wait_for(lambda: page_shows(browser, "hi", "gpt2"))
    assert browser.find_element("id", "error").text == (
        'unknown encoding "gpt5" in the link; using gpt2; unknown view "tokens" in the link; using text; '
        'unknown encoding to compare "o300k" in the link; using o200k_base')
    browser.find_element("id", "text").send_keys("!")  # said once: the next change clears it
    wait_for(lambda: page_shows(browser, "hi!", "gpt2"))
    assert not browser.find_element("id", "error").is_displayed()


def test_a_stopped_server_is_said_in_words_that_say_what_to_do(browser):
    """With the server stopped (Ctrl-C), each change showed the browser's bare "Failed to fetch"."""
    server = PlaygroundServer(Playground(), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        browser.get(server.url + "?text=hi")
        wait_for(lambda: page_shows(browser, "hi", "gpt2"))
    finally:
        server.shutdown()
        server.server_close()
    browser.find_element("id", "text").send_keys("!")
    error = wait_for(lambda: browser.find_element("id", "error").text)
    assert error.startswith("the playground server did not answer (") and "start it again, then reload" in error


def test_a_merge_trace_stays_when_only_the_view_changes(browser, server):
    """Switching the view (text, ids, bytes, Ġ form) drew the same tokens again and dropped the merge trace the
    learner was reading, and the token's selection with it."""
    browser.get(server.url + "?text=" + quote("Not all heroes wear capes."))
    wait_for(lambda: page_shows(browser, "Not all heroes wear capes.", "gpt2"))
    browser.find_elements("css selector", "#tokens [data-token-id]")[4].click()
    wait_for(lambda: "Token 5: id 1451" in browser.find_element("id", "merge-trace").text)
    browser.find_element("css selector", 'input[name="view"][value="ids"]').click()
    wait_for(lambda: "view-ids" in browser.find_element("id", "tokens").get_attribute("class"))
    assert "Token 5: id 1451" in browser.find_element("id", "merge-trace").text
    assert [e.get_attribute("data-index") for e in browser.find_elements("css selector", "#tokens .selected")] == ["4"]
    browser.find_element("id", "text").send_keys(" More.")  # a new text: a new trace is to be asked for
    wait_for(lambda: page_shows(browser, "Not all heroes wear capes. More.", "gpt2"))
    assert "Click a token" in browser.find_element("id", "merge-trace").text
    assert not browser.find_elements("css selector", "#tokens .selected")


def compare_rows(browser, names: list[str]) -> bool:
    """The compare panel's rows are of these encodings, in this order, each with "newest"'s tokens under it."""
    rows = browser.find_elements("css selector", "#compare-rows .compare-row")
    encodings = {"my,tok": tiny_saved("my,tok"), "gpt2,cl100k_base": tiny_saved("gpt2,cl100k_base")}
    return [row.get_attribute("data-encoding") for row in rows] == names and all(
        [int(e.get_attribute("data-token-id")) for e in row.find_elements("css selector", "[data-token-id]")]
        == (encodings.get(name) or get_encoding(name)).encode("newest") for row, name in zip(rows, names))


def test_a_link_compares_encodings_whose_names_hold_commas(browser, comma_server):
    """The page's link joined the names to compare with commas, and the page split them at every comma (as the
    API did): a saved folder called my,tok could be picked to compare with, and then its row was an error."""
    browser.get(comma_server.url + "?text=newest&encoding=gpt2&compare=my%2Ctok&compare=gpt2%2Ccl100k_base")
    wait_for(lambda: compare_rows(browser, ["gpt2", "my,tok", "gpt2,cl100k_base"]))
    assert not browser.find_element("id", "error").is_displayed()
    assert browser.current_url.endswith("&compare=my%2Ctok&compare=gpt2%2Ccl100k_base")
    select(browser, "compare-2", "")
    select(browser, "compare-1", "gpt2,cl100k_base")
    wait_for(lambda: compare_rows(browser, ["gpt2", "gpt2,cl100k_base"]))
    browser.refresh()  # one name whole, though it reads as two names joined by a comma too
    wait_for(lambda: compare_rows(browser, ["gpt2", "gpt2,cl100k_base"]))
    # an older link, names joined by commas, opens as before where it reads one way only
    browser.get(comma_server.url + "?text=newest&encoding=gpt2&compare=cl100k_base,my,tok")
    wait_for(lambda: compare_rows(browser, ["gpt2", "cl100k_base", "my,tok"]))
    browser.get(comma_server.url + "?text=newest&encoding=gpt2&compare=gpt2,cl100k_base,o200k_base")
    wait_for(lambda: page_shows(browser, "newest", "gpt2"))
    assert browser.find_element("id", "error").text == (
        'compare="gpt2,cl100k_base,o200k_base" in the link reads as gpt2 | cl100k_base | o200k_base or as '
        "gpt2,cl100k_base | o200k_base (a name holds a comma); comparing with neither: give each encoding a "
        "compare= of its own")
    assert not browser.find_element("id", "compare").is_displayed()


@pytest.mark.parametrize("compare", ["compare=cl100k_base&compare=o200k_base&compare=r50k_base&compare=p50k_base",
                                     "compare=cl100k_base,o200k_base,r50k_base,p50k_base"])
def test_a_link_comparing_with_more_than_two_says_which_it_left_out(browser, server, compare):
    """The page has two encodings to compare with: a link naming more compared the first two and silently
    dropped the rest, from the page and from the link it wrote back."""
    browser.get(server.url + f"?text=newest&{compare}")
    wait_for(lambda: compare_rows(browser, ["gpt2", "cl100k_base", "o200k_base"]))
    assert browser.find_element("id", "error").text == (
        'the page compares with at most two encodings; left out of the link: "r50k_base", "p50k_base"')


class SlowPlayground(Playground):
    """A playground that notes each text it encodes and each token it explains, and takes 2 s over the text
    "slow" and over token 0's merges."""

    def __init__(self):
        super().__init__()
        self.encoded, self.explained = [], []

    def encode(self, fields):
        self.encoded.append(fields.get("text", ""))
        if fields.get("text") == "slow":
            time.sleep(2)
        return super().encode(fields)

    def explain(self, fields):
        self.explained.append(fields.get("token"))
        if fields.get("token") == "0":
            time.sleep(2)
        return super().explain(fields)


RECORD_FETCHES = """window.asked = [];  // each request the page sends: its body and whether it was aborted
    const fetchNow = window.fetch;
    window.fetch = (path, init) => {
      window.asked.push({ path: String(path), body: init.body, signal: init.signal });
      return fetchNow(path, init);
    };"""


def aborted(browser, path: str, part: str) -> list[bool]:
    """Whether each request the page sent to ``path`` with ``part`` in its body was aborted."""
    return browser.execute_script("return window.asked.filter((a) => a.path === arguments[0] && "
                                  "a.body.includes(arguments[1])).map((a) => Boolean(a.signal && a.signal.aborted))",
                                  path, part)


def type_text(browser, text: str) -> None:
    browser.execute_script("const box = document.getElementById('text'); box.value = arguments[0];"
                           "box.dispatchEvent(new Event('input'));", text)


def test_a_request_a_newer_one_replaced_is_aborted_and_not_computed(browser):
    """Typing on while an answer was on its way, or clicking another token, left the older requests running:
    the page dropped their answers when they came, but the browser waited for them (six at a time to one
    server), and the server computed each, however long ago its client had moved on."""
    playground = SlowPlayground()
    server = PlaygroundServer(playground, "127.0.0.1", 0, workers=1)  # one worker: a request waits its turn
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        browser.get(server.url)
        wait_for(lambda: browser.execute_script("return document.body.dataset.ready"))
        browser.execute_script(RECORD_FETCHES)
        type_text(browser, "slow")  # the worker is busy with it for 2 s
        wait_for(lambda: playground.encoded[-1:] == ["slow"])
        type_text(browser, "gone")  # waits for the worker, and is replaced meanwhile
        wait_for(lambda: len(aborted(browser, "/api/encode", '"gone"')) == 1)  # sent
        type_text(browser, "fast")
        wait_for(lambda: page_shows(browser, "fast", "gpt2"))
        assert aborted(browser, "/api/encode", '"slow"') == aborted(browser, "/api/encode", '"gone"') == [True]
        assert aborted(browser, "/api/encode", '"fast"') == [False]
        assert playground.encoded == ["", "slow", "fast"]  # the worker never took up the request left behind
        # a merge trace asked for, then another token's: the first request is aborted, its answer never drawn
        type_text(browser, "Not all heroes")
        wait_for(lambda: page_shows(browser, "Not all heroes", "gpt2"))
        browser.find_elements("css selector", "#tokens [data-token-id]")[0].click()
        wait_for(lambda: playground.explained[-1:] == ["0"])
        browser.find_elements("css selector", "#tokens [data-token-id]")[2].click()
        wait_for(lambda: "Token 3:" in browser.find_element("id", "merge-trace").text)
        assert aborted(browser, "/api/explain", '"token":0') == [True]
        assert aborted(browser, "/api/explain", '"token":2') == [False]
        # and so is one of a text that changed since
        browser.find_elements("css selector", "#tokens [data-token-id]")[0].click()
        wait_for(lambda: len(aborted(browser, "/api/explain", '"token":0')) == 2)
        type_text(browser, "Not all heroes wear")
        wait_for(lambda: page_shows(browser, "Not all heroes wear", "gpt2"))
        assert aborted(browser, "/api/explain", '"token":0') == [True, True]
        time.sleep(2.5)  # the slow answers would have come by now
        assert page_shows(browser, "Not all heroes wear", "gpt2") and "Click a token" in browser.find_element(
            "id", "merge-trace").text
        assert not browser.find_element("id", "error").is_displayed()
    finally:
        server.shutdown()
        server.server_close()


def test_a_request_whose_client_left_before_a_worker_took_it_up_is_not_computed():
    playground = SlowPlayground()
    server = PlaygroundServer(playground, "127.0.0.1", 0, workers=1)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        first = threading.Thread(target=get_json, args=(server, "/api/encode?text=slow"))
        first.start()
        wait_for(lambda: playground.encoded == ["slow"])  # the worker is busy with it for 2 s
        with socket.create_connection(server.server_address[:2], timeout=10) as client:
            client.sendall(b"GET /api/encode?text=gone HTTP/1.1\r\nHost: playground\r\n\r\n")
            time.sleep(0.5)  # read, and waiting for the worker; then the client leaves
        assert get_json(server, "/api/encode?text=next")["count"]["tokens"] == 1
        first.join()
        assert playground.encoded == ["slow", "next"]
    finally:
        server.shutdown()
        server.server_close()


def test_a_connection_of_a_descriptor_past_1024_is_answered(server):
    """A look at the client's socket with select(), which takes file descriptors below 1,024 only, took a
    connection of a room's 1,025th descriptor for a client that had left, and answered nothing."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(1200, hard), hard))
    held = []
    try:
        with open(os.devnull) as null:
            while not held or held[-1] < 1030:
                held.append(os.dup(null.fileno()))
        assert get_json(server, "/api/encode?text=hi")["count"]["tokens"] == 1
    finally:
        for descriptor in held:
            os.close(descriptor)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
