"""The teaching tools: merge_steps replays merge_reference exactly; show/explain/compare print what encode does
(run as commands: piped, through conftest.py's ``cli`` fixture, in this process and in its own; and on a
terminal); CharTokenizer round-trips and names what it cannot encode."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenizer import Encoding, get_encoding, merge_reference
from tokenizer.teach import (CharTokenizer, compare, compare_lines, explain, merge_steps, render_show, show,
                            token_pieces, token_texts)

REPO = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
SAMPLE = "Not all heroes wear capes. Öffnen 中文😀 x  \n\tdef f(): return 12345 <|endoftext|>done"


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=40))
@pytest.mark.parametrize("name", ["gpt2", "cl100k_base"])
def test_merge_steps_end_where_merge_reference_does(name, text):
    enc = get_encoding(name)
    data = text.encode("utf-8", errors="replace")
    steps = list(merge_steps(data, enc.merge_ranks))
    final = list(steps[-1].parts) if steps else [data[i : i + 1] for i in range(len(data))]
    assert final == merge_reference(data, enc.merge_ranks)
    for step in steps:  # each step really is a merge of adjacent parts of that rank
        assert enc.merge_ranks[step.left + step.right] == step.rank
    assert len(steps) == len(data) - len(final)


def test_merge_steps_on_a_known_word():
    steps = list(merge_steps(b" capes", get_encoding("gpt2").merge_ranks))
    assert [(s.left, s.right) for s in steps] == [(b" ", b"c"), (b"e", b"s"), (b"a", b"p"), (b" c", b"ap")]
    assert steps[-1].parts == (b" cap", b"es")


def test_docstring_examples():
    import doctest

    import tokenizer.teach

    result = doctest.testmod(tokenizer.teach)
    assert result.failed == 0 and result.attempted > 0


def test_token_texts_put_a_split_character_on_its_last_token():
    enc = get_encoding("gpt2")
    ids = enc.encode("😀!")
    assert "".join(token_texts(enc, ids)) == "😀!" and token_texts(enc, ids)[-1] == "!"
    assert token_texts(enc, ids)[0] == ""  # the emoji's first byte alone is no character yet


# ---- show -------------------------------------------------------------------------------------------------


def test_show_piped_is_plain_tokens_and_ids(cli):
    result = cli("show", SAMPLE, "--allowed_special", "all")  # cli() checks the exit status
    enc = get_encoding("gpt2")
    ids = enc.encode(SAMPLE, allowed_special="all")
    assert "\x1b[" not in result.stdout
    assert result.stdout == "|".join(token_pieces(enc, ids)) + "\n" + " ".join(map(str, ids)) + "\n" + (
        f"{len(ids)} tokens, {len(SAMPLE)} characters, {len(SAMPLE.encode())} bytes (gpt2)\n"
    )


def test_show_and_compare_give_a_split_characters_tokens_their_bytes():
    enc = get_encoding("gpt2")
    assert render_show("a我b", enc).splitlines()[0] == "a|\\xe6\\x88|\\x91|b"  # no empty piece
    ids = enc.encode(SAMPLE, allowed_special="all")
    pieces = token_pieces(enc, ids)
    assert all(pieces) and len(pieces) == len(ids)
    # each piece is the token's text, or (part of a character) its bytes written out
    for token, piece in zip(ids, pieces):
        assert piece == enc.decode_single_token_bytes(token).decode("utf-8", "backslashreplace")
    row = list(compare_lines("😀", [(enc, "GPT-2")]))[1]
    assert row.strip() == "|" + "|".join(token_pieces(enc, enc.encode("😀"))) + "|" and "||" not in row


@pytest.mark.parametrize("color", [False, True])
def test_show_writes_control_characters_out_and_keeps_line_breaks_and_tabs(color):
    # a carriage return sent the cursor back over the line and an escape sequence recoloured the terminal
    enc = get_encoding("gpt2")
    text = "hello\r\nworld\rX\x1b[31mred\x07\x85\x7f\tend"
    shown = render_show(text, enc, color)
    body = shown.rsplit("\n", 2)[0]
    if color:
        body = re.sub(r"\x1b\[[0-9;]*m", "", body)  # the colours show itself paints
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", body), repr(body)
    assert all(mark in body for mark in ["\\r", "\\x1b", "\\x07", "\\x85", "\\x7f", "\n", "\t"])
    assert re.sub(r"\x1b\[[0-9;]*m", "", shown).rsplit("\n", 2)[1] == " ".join(map(str, enc.encode(text)))


def test_compare_writes_control_characters_out():
    enc = get_encoding("gpt2")
    row = list(compare_lines("a\x1b[31mb\r\n\x07\t", [(enc, "GPT-2")]))[1]
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", row), repr(row)  # an escape sequence recoloured the terminal
    assert row.strip() == "|" + "|".join(p.encode("unicode_escape").decode() for p in token_pieces(enc, enc.encode(
        "a\x1b[31mb\r\n\x07\t"))) + "|"


def test_show_on_a_terminal_is_coloured():
    master, slave = os.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NO_COLOR", None)
    proc = subprocess.run([sys.executable, "-m", "tokenizer", "show", "Not all heroes", "--encoding", "cl100k_base"],
                          stdout=slave, stderr=subprocess.PIPE, env=env, cwd=REPO)
    os.close(slave)
    output = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # Linux signals the end of a pty's output this way
            break
        if not data:
            break
        output += data
    os.close(master)
    text = output.decode()
    assert proc.returncode == 0, proc.stderr
    assert text.count("\x1b[30;43m") == 2 and "\x1b[30;46m" in text  # token and id in the same colour
    plain = ANSI.sub("", text).replace("\r\n", "\n")
    ids_line = " ".join(map(str, get_encoding("cl100k_base").encode("Not all heroes")))
    assert plain.splitlines()[:2] == ["Not all heroes", ids_line]


def test_show_color_can_be_forced_and_newlines_stay_visible(cli):
    result = cli("show", "a\nb", "--color", "True")
    assert "↵" in result.stdout and ANSI.sub("", result.stdout).startswith("a↵\nb")


# ---- explain ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["gpt2", "cl100k_base", "o200k_base"])
def test_explain_ids_add_up_to_encode(cli, encoding):
    result = cli("explain", SAMPLE, "--encoding", encoding, "--allowed_special", "all")
    ids = []
    for line in result.stdout.splitlines():
        if m := re.search(r"= ids? \[?([\d, ]+)\]?$", line):
            ids += [int(i) for i in m.group(1).split(",")]
    assert ids == get_encoding(encoding).encode(SAMPLE, allowed_special="all")


def test_explain_shows_merges_and_the_whole_token_shortcut(cli):
    out = cli("explain", "Not all heroes wear capes.").stdout
    heroes = out.split("pre-token ' heroes'")[1].split("pre-token")[0]
    # tiktoken's shortcut and the six merges OpenAI's bpe() makes, which end at the same token
    assert "is itself a token (id 10281): encode takes it whole" in heroes and "the merges reach it too" in heroes
    assert re.findall(r"step +\d: (.*) -> (.*?)  \(", heroes) == [
        ("'h' + 'e'", "'he'"), ("'e' + 's'", "'es'"), ("'r' + 'o'", "'ro'"), ("' ' + 'he'", "' he'"),
        ("' he' + 'ro'", "' hero'"), ("' hero' + 'es'", "' heroes'")]
    assert heroes.rstrip().endswith("tokens ' heroes' = ids [10281]")
    assert "' c' + 'ap' -> ' cap'" in out and "ids [1451, 274]" in out
    # a merge under its two names, never a bare rank: vocab.bpe's merge #13 makes token 269
    assert "' ' + 'c' -> ' c'  (merge #13, token id 269)" in out and "rank 269" not in out
    # the notebook view names the same two numbers in its columns
    from tokenizer.teach import explain

    table = explain(" capes")._repr_html_()
    columns = table[table.index("<table>") :]  # (the legend above says whose rank the token id is)
    assert "<th>merge #</th><th>token id</th>" in columns and "rank" not in columns
    assert "<td>&#x27; c&#x27;</td><td>13</td><td>269</td>" in table


def test_explains_notebook_table_has_the_legend_of_its_printed_form():
    """The printed explain says what "merge #N" and "token id" are under its first line; the table Jupyter draws
    had the columns without a word on them."""
    from tokenizer.teach import EXPLAIN_LEGEND, explain, explain_lines

    legend = list(explain_lines(" capes"))[1 : 1 + len(EXPLAIN_LEGEND)]
    assert legend == list(EXPLAIN_LEGEND) and any("merge #N" in line for line in legend)
    table = explain(" capes")._repr_html_()
    said = html.unescape(re.sub(r"<[^>]+>", " ", table))
    assert " ".join("".join(legend).split()) in " ".join(said.split())
    assert table.index("merge #N") < table.index("<table>")  # read before the columns it explains


def test_the_teaching_views_count_steps_and_tokens_from_1_and_say_so():
    """explain numbered its steps from 1 while the playground called the text's fifth token "Token 4": one rule
    in every view, said where a learner meets it (the browser test sees the page say it for a clicked token)."""
    from tokenizer.teach import EXPLAIN_LEGEND, explain_lines

    legend = " ".join("".join(EXPLAIN_LEGEND).split())
    assert "step n: the pre-token's n-th merge, counted from 1 as the playground counts a text's tokens" in legend
    steps = [line.split(":")[0].split() for line in explain_lines(" capes") if line.startswith("  step")]
    assert [int(number) for _, number in steps] == [1, 2, 3, 4]
    table = explain(" capes")._repr_html_()
    assert re.findall(r"<tr><td>(\d+)</td>", table) == ["1", "2", "3", "4"] and "counted from 1" in table
    page = (REPO / "tokenizer" / "playground" / "playground.js").read_text(encoding="utf-8")
    assert "`Token ${story.token + 1}: id" in page and "span.title = `token ${n + 1}: id" in page


def test_merge_number_is_the_place_in_the_merge_list():
    from gpt2_numpy.encoder import PACKAGED
    from tokenizer import Encoding
    from tokenizer.teach import merge_number
    from tokenizer.vocab_files import gpt2_str_to_token, read_vocab_bpe

    lines = read_vocab_bpe(PACKAGED / "vocab.bpe")  # OpenAI's bpe_ranks: the 0-based line of each merge
    gpt2 = get_encoding("gpt2")
    for line in (0, 13, 10_025, len(lines) - 1):
        token = gpt2_str_to_token("".join(lines[line]))
        assert merge_number(gpt2, token) == line and gpt2.token_ids[token] == 256 + line == gpt2.merge_ranks[token]
    for name in ("cl100k_base", "o200k_base"):  # tiktoken's ranks: the merged tokens of lower rank, counted
        enc = get_encoding(name)
        for token in (b" the", max(enc.merge_ranks, key=enc.merge_ranks.get)):
            rank = enc.merge_ranks[token]
            assert merge_number(enc, token) == sum(len(t) > 1 and r < rank for t, r in enc.merge_ranks.items())
    trained = Encoding.from_vocab_merges({i: bytes([i]) for i in range(256)} | {300: b"ab", 256: b"abc"},
                                         [(b"a", b"b"), (b"ab", b"c")])
    assert merge_number(trained, b"ab") == 0 and merge_number(trained, b"abc") == 1  # ids 300 and 256


def test_the_legend_says_whose_rank_the_token_id_is():
    """explain's legend called the token id "the merge's rank in OpenAI's encodings", while 03 teaches that
    OpenAI's encoder.py ranks a merge by its merge number (bpe_ranks): the rank that is the token id is tiktoken's,
    and explain and the playground say so."""
    from gpt2_numpy.encoder import get_encoder
    from tokenizer.teach import EXPLAIN_LEGEND, explain_lines, merge_number

    gpt2 = get_encoding("gpt2")
    openai_rank = get_encoder("124M", "models").bpe_ranks[("Ġ", "c")]
    assert openai_rank == merge_number(gpt2, b" c") == 13 and gpt2.merge_ranks[b" c"] == gpt2.token_ids[b" c"] == 269
    legend = " ".join("".join(list(explain_lines("capes"))[1 : 1 + len(EXPLAIN_LEGEND)]).split())
    assert "token id: the id of the token it makes, which is also the merge's rank in tiktoken's encodings" in legend
    assert "OpenAI" not in legend
    playground = (REPO / "tokenizer" / "playground" / "playground.js").read_text(encoding="utf-8")
    assert "token id: the token it makes, which tiktoken's encodings also rank merges by." in playground


def test_an_added_token_is_called_an_added_token_in_the_notebook_and_the_playground_as_explain_prints_it(tmp_path):
    """explain printed "added token '<x>'" for a tokenizer.json's added token that is not special, while its
    notebook table and the playground called it a special token (cut out by the special-token rule)."""
    import json

    from tokenizer.loading import load_encoding
    from tokenizer.serve import Playground
    from tokenizer.vocab_files import token_to_gpt2_str

    def added(token_id, content, special):
        return {"id": token_id, "content": content, "special": special, "single_word": False, "lstrip": False,
                "rstrip": False, "normalized": False}

    vocab = {token_to_gpt2_str(bytes([b])): b for b in range(256)} | {"ab": 256}
    (tmp_path / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "added_tokens": [added(257, "<x>", False), added(258, "<s>", True)], "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "post_processor": None, "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": ["a b"], "ignore_merges": False}}), encoding="utf-8")
    enc = load_encoding(tmp_path / "tokenizer.json")
    text = "ab<x>ab<s>"
    explained = explain(text, enc)
    printed = repr(explained)
    assert "added token '<x>' = id 257" in printed and "special token '<s>' = id 258" in printed
    page = explained._repr_html_()
    assert "added token (not special: always taken whole, never merged) <b>&lt;x&gt;</b> = id 257" in page
    assert "special token <b>&lt;s&gt;</b> = id 258" in page and page.count("special token") == 1
    assert page.count("pre-token <b>ab</b>: 2 bytes, ids [256]") == 2  # as printed: "pre-token 'ab': 2 bytes"
    playground = Playground([enc])
    name = playground.answer("/api/encodings", {})["encodings"][0]  # the saved tokenizer is offered first
    stories = [playground.answer("/api/explain", {"text": text, "encoding": name, "token": str(i)}) for i in (1, 3)]
    assert [(story["added"], story["special"]) for story in stories] == [(True, False), (False, True)]


def test_merge_number_of_what_no_merge_makes_is_refused():
    """merge_number(gpt2, b"a") answered 0, the place of the first merge (" t"): gpt2's table ranks its 256 bytes
    too, and a byte's rank counted no merged token before it. A trained encoding said KeyError: b'a', and a str
    a bare KeyError. Each now says what is wrong."""
    from tokenizer import Tokenizer
    from tokenizer.teach import merge_number

    gpt2 = get_encoding("gpt2")
    listed = Tokenizer.from_files(REPO / "tokenizer/data/encoder.json", REPO / "tokenizer/data/vocab.bpe").encoding
    for enc in (gpt2, listed):
        with pytest.raises(ValueError, match=r"b'a' is a single byte, one of the 256 tokens BPE starts from"):
            merge_number(enc, b"a")
        with pytest.raises(ValueError, match=rf"b'xyzzy!' is not a token of {enc.name}"):
            merge_number(enc, b"xyzzy!")
        with pytest.raises(TypeError, match=r"takes a token's bytes, not str: pass ' c'\.encode\('utf-8'\)"):
            merge_number(enc, " c")
        assert (merge_number(enc, b" t"), merge_number(enc, b" c")) == (0, 13)


def test_the_teaching_tools_share_one_special_token_rule(cli):
    from tokenizer import teach

    text = "Hi<|endoftext|> there"
    assert teach.TEACHING_SPECIAL_RULE == "allowed"
    # the command and the functions, without options, show special-token text as its one id
    assert cli("explain", text).stdout == repr(teach.explain(text)) + "\n"
    assert "special token '<|endoftext|>' = id 50256" in repr(teach.explain(text))
    assert "encode() refuses special-token text unless allowed_special names it" in repr(teach.explain(text))
    assert 50256 in teach.show(text).ids and 50256 in teach.compare(text).ids["gpt2"]
    assert "50256" in cli("show", text).stdout and "50256" not in cli("encode", text, status=2).stdout
    assert cli("compare", text).stdout == "".join(line + "\n" for line in teach.compare_lines(text))
    for command in ("show", "explain", "compare"):  # tiktoken's rule, one option away
        stderr = cli(command, text, "--allowed_special", "none", "--disallowed_special", "all", status=2).stderr
        assert "'<|endoftext|>'" in stderr and "--allowed_special all" in stderr
    # tiktoken's rule is one option away, in both
    stderr = cli("explain", text, "--allowed_special", "none", "--disallowed_special", "all", status=2).stderr
    assert "'<|endoftext|>'" in stderr and "--allowed_special all" in stderr
    with pytest.raises(ValueError, match="special token .<|endoftext|>., which is disallowed"):
        teach.explain(text, allowed_special=set(), disallowed_special="all")
    assert "special token '" not in cli("explain", text, "--disallowed_special", "none",
                                        "--allowed_special", "none").stdout


def test_notebook_explain_refuses_a_pre_token_over_the_limit_when_called():
    # its HTML replays every pre-token's merges, in time and memory that grow with the square of its length
    from tokenizer import teach

    with pytest.raises(ValueError, match=rf"is {teach.MAX_EXPLAIN_BYTES + 1:,} bytes; .* up to "
                       rf"{teach.MAX_EXPLAIN_BYTES:,} bytes"):
        teach.explain("ok " + "7" * teach.MAX_EXPLAIN_BYTES)
    assert teach.explain("7" * teach.MAX_EXPLAIN_BYTES).pieces[0].text == "7" * teach.MAX_EXPLAIN_BYTES


# ---- compare ----------------------------------------------------------------------------------------------


def test_compare_counts_match_each_encoding(cli):
    text = "        if x:\n            return 1234567"
    result = cli("compare", text)
    counts = dict(re.findall(r"^(\w+)\s+GPT-\S+\s+(\d+) tokens", result.stdout, flags=re.M))
    expected = {name: str(len(get_encoding(name).encode(text))) for name in ("gpt2", "cl100k_base", "o200k_base")}
    assert counts == expected
    assert int(counts["cl100k_base"]) < int(counts["gpt2"])  # GPT-4 has tokens for runs of spaces
    assert "|            |" not in result.stdout.split("cl100k_base")[0]  # GPT-2: no 12-space token


def test_notebook_compare_keeps_a_saved_tokenizer_apart_from_the_registered_encoding_of_its_name(tmp_path):
    # GPT-2's vocabulary saved in a folder called cl100k_base: its row was labelled GPT-4, and both rows drew
    # the registered cl100k_base's tokens (the ids were kept by name)
    from tokenizer import load
    from tokenizer.teach import compare

    get_encoding("gpt2").save(tmp_path / "cl100k_base")
    saved, text = load(tmp_path / "cl100k_base"), "        return x"
    drawn = compare(text, [saved, "cl100k_base"])._repr_html_()
    rows = drawn.split("<b>cl100k_base</b>")[1:]
    assert [row.split(":")[0].strip() for row in rows] == ["saved", "GPT-4"]
    for row, enc in zip(rows, [saved, get_encoding("cl100k_base")]):
        assert [int(i) for i in re.findall(r'data-token-id="(\d+)"', row)] == enc.encode(text)
    # the registered encoding over the readable core is the registered encoding still
    assert "GPT-2" in compare(text, [get_encoding("gpt2", core="reference")])._repr_html_()


def test_notebook_compare_of_one_encoding_or_none_says_what_it_takes():
    """compare(text, "cl100k_base"), one name where walkthrough 02 passes a list, read the name a character at a
    time ("Unknown encoding 'c'"); an Encoding there raised "not iterable"; an empty list made the object, whose
    printing then failed inside with "max() arg is an empty sequence". Each is now refused at the call."""
    from tokenizer.teach import compare

    for one in ("cl100k_base", get_encoding("gpt2")):
        with pytest.raises(TypeError, match=r"compare takes a list of encodings .* not one encoding; show\(text"):
            compare("hello world", one)
    with pytest.raises(ValueError, match=r"compare needs at least one encoding"):
        compare("hello world", [])
    assert compare("hello world", ["cl100k_base"]).ids == {"cl100k_base": [15339, 1917]}


def test_show_explain_and_compare_take_cs336s_tokenizer_and_openais_encoder():
    """Walkthrough 01 builds a CS336 Tokenizer (section 6), then shows tokens with show/explain/compare (section 7);
    03 and 04 build OpenAI's Encoder. Given either, show and explain failed inside (encode() got an unexpected
    keyword argument 'allowed_special') and compare too ('Tokenizer' object has no attribute 'name'). They now
    take the Encoding each holds as .encoding."""
    from gpt2_numpy.encoder import get_encoder
    from tokenizer import Tokenizer
    from tokenizer.teach import compare, explain, show

    gpt2 = get_encoding("gpt2")
    tok = Tokenizer({i: token for token, i in gpt2.token_ids.items()}, gpt2.merges, ["<|endoftext|>"])
    text = "Not all heroes wear capes.<|endoftext|>"
    ids = gpt2.encode(text, allowed_special="all")
    for holder in (tok, get_encoder("124M", "models")):
        assert show(text, holder).ids == ids
        assert repr(explain(" heroes", holder)).endswith("tokens ' heroes' = ids [10281]")
        assert compare(text, ["gpt2", holder]).ids == {"gpt2": ids, holder.encoding.name: ids}
        with pytest.raises(TypeError, match="compare takes a list of encodings"):
            compare(text, holder)


# ---- characters -------------------------------------------------------------------------------------------


def test_char_tokenizer_round_trip_and_tables():
    text = "To be, or not to be: that is the question. ÄÖÜ 中"
    tok = CharTokenizer(text)
    assert tok.vocab_size == len(set(text)) and sorted(tok.stoi) == list(tok.stoi)
    assert all(tok.itos[i] == ch for ch, i in tok.stoi.items())
    ids = tok.encode(text)
    assert tok.decode(ids) == text and len(ids) == len(text)
    # BPE is shorter
    assert len(ids) > 3 * len(get_encoding("gpt2").encode("To be, or not to be: that is the question."))


def test_char_tokenizer_errors_name_the_problem():
    tok = CharTokenizer("abc")
    with pytest.raises(ValueError, match=r"character 'z' \(U\+007A\) at position 2 .*build the tokenizer from a text"):
        tok.encode("abz")
    with pytest.raises(ValueError, match="ids run from 0 to 2"):
        tok.decode([0, 7])
    with pytest.raises(ValueError, match="non-empty"):
        CharTokenizer("")
    # bytes are ints to iterate over: it failed in ord() with "expected string of length 1, but int found"
    with pytest.raises(TypeError, match=r"^CharTokenizer encodes a str, got bytes: decode it first"):
        tok.encode(b"ab")
    assert tok.encode(["a", "b"]) == [0, 1]  # as stoi over any sequence of characters


def test_show_says_each_count_in_the_singular_where_it_is_1():
    # "1 tokens, 1 characters, 1 bytes": the summary line of show, printed and in a notebook
    gpt2 = get_encoding("gpt2")
    assert render_show("a", gpt2, False).splitlines()[2] == "1 token, 1 character, 1 byte (gpt2)"
    assert render_show("hi", gpt2, False).splitlines()[2] == "1 token, 2 characters, 2 bytes (gpt2)"
    assert render_show("é", gpt2, False).splitlines()[2] == "1 token, 1 character, 2 bytes (gpt2)"
    assert render_show("", gpt2, False).splitlines()[2] == "0 tokens, 0 characters, 0 bytes (gpt2)"
    assert "1 token, 1 character, 1 byte (gpt2)" in show("a")._repr_html_()


def test_explains_notebook_table_says_what_its_printed_form_says_of_a_pre_token_that_is_a_token():
    """In a notebook, every pre-token that is itself a token was said to be reached by "the merges ... too": a
    single byte (no merge at all, under an empty table) and a hand-made vocabulary's token that no merge builds
    as well, where the printed explain says "the merges alone end at 'ab' 'c': no merge builds this token"."""
    single = explain("a")._repr_html_()
    assert "<b>a</b>: 1 byte, ids [64]</p>" in single and "<table>" not in single and "merges lead" not in single
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}
    hand_made = Encoding.from_vocab_merges(vocab, [(b"a", b"b")], name="hand-made")
    assert "the merges alone end at 'ab' 'c': no merge builds this token" in repr(explain("abc", hand_made))
    html = explain("abc", hand_made)._repr_html_()
    assert "the merges alone end at &#x27;ab&#x27; &#x27;c&#x27;: no merge builds this token" in html
    assert "merges lead to it too" not in html
    assert "(itself a token: encode takes it whole; the merges lead to it too)" in explain(" heroes")._repr_html_()


def test_explain_and_compare_in_a_notebook_say_1_byte_and_1_token():
    """explain's notebook table headed a one-byte pre-token "1 bytes" and compare's rows said "1 tokens" (their
    printed forms said "1 byte" already): each count's noun is singular where the count is 1."""
    one_byte = explain("a")._repr_html_()
    assert "</b>: 1 byte, ids [64]" in one_byte and "1 bytes" not in one_byte
    assert "</b>: 3 bytes, ids [1169]" in explain("the", "r50k_base")._repr_html_()
    compared = compare("a", ["gpt2", "cl100k_base"])._repr_html_()
    assert compared.count(": 1 token\n") == 2 and "1 tokens" not in compared
    assert ": 2 tokens\n" in compare("a b", ["gpt2"])._repr_html_()


def test_compare_names_an_encoding_the_same_way_whatever_it_is_compared_with():
    # the closing line said "gpt2 (2)" beside cl100k_base, and "gpt2 (GPT-2) (2)" beside a saved gpt2: its label
    # was added only where another row had its name (test_cli checks that case); and two rows alike
    # ("--encodings gpt2,gpt-2") were one, and the line was left out
    text = "        return x"
    beside_gpt4 = list(compare_lines(text, [("gpt2", "GPT-2"), ("cl100k_base", "GPT-4")]))[-1]
    assert beside_gpt4 == "\nfewest tokens: cl100k_base (GPT-4) (3); gpt2 (GPT-2) 3.00x as many"
    twice = list(compare_lines("hi", [("gpt2", "GPT-2"), ("gpt2", "GPT-2")]))[-1]
    assert twice == "\nfewest tokens: gpt2 (GPT-2) (1); gpt2 (GPT-2) 1.00x as many"
    unlabelled = list(compare_lines(text, [("gpt2", ""), ("cl100k_base", "GPT-4")]))[-1]
    assert unlabelled == "\nfewest tokens: cl100k_base (GPT-4) (3); gpt2 3.00x as many"
