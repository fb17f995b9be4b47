"""Notebooks: the walkthrough notebook is its markdown page, run (tests/notebooks.py), so it cannot rot; and the
objects tokenizer.teach's show/explain/compare return render in Jupyter (_repr_html_) and print in terminals."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import tiktoken

from conftest import CORPUS, REPO, corpus_text
from notebooks import cells_of, comparable, dumps, notebook, run_notebook
from tokenizer import get_encoding
from tokenizer.teach import compare, compare_lines, explain, explain_lines, pre_tokens, render_show, show

NOTEBOOKS = ["01-characters-to-bpe", "02-unicode-regex-special-tokens", "03-gpt2-vocab-files",
             "04-three-spellings-of-bpe", "05-training-cs336", "06-ids-to-next-token", "07-the-model-taken-apart"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_notebook_is_its_page_run(name, monkeypatch):
    monkeypatch.chdir(REPO / "docs")  # where Jupyter starts a notebook; its first cell moves to the root
    page = (REPO / "docs" / f"{name}.md").read_text(encoding="utf-8")
    made = dumps(notebook(page))
    stored = json.loads((REPO / "docs" / f"{name}.ipynb").read_text(encoding="utf-8"))
    assert dumps(comparable(stored)) == dumps(comparable(json.loads(made))), (
        f"docs/{name}.ipynb is not its page run: python tests/notebooks.py docs/{name}.md rewrites it")
    cells = json.loads(made)["cells"]
    assert sum(cell["cell_type"] == "code" for cell in cells) >= 10
    if "tokenizer.teach" in page:  # what teach's show/explain/compare return renders as HTML in Jupyter
        assert any("text/html" in out.get("data", {}) for cell in cells for out in cell.get("outputs", []))


def test_only_the_numbers_a_timing_cell_prints_may_differ():
    page = "```python\nprint('took 1.25 s')  # timing: varies\n```\n\n```python\nprint('took 1.25 s')\n```\n"
    ran = run_notebook(cells_of(page))

    def printing(text):  # the cells as if another run had printed `text`
        return [{**cell, "outputs": [{**cell["outputs"][0], "text": [text]}]} for cell in ran]

    first, second = (comparable({"cells": cells})["cells"] for cells in (ran, printing("took 3.5 s\n")))
    assert first[0] == second[0] and first[0]["outputs"][0]["text"] == ["took N s\n"]
    assert first[1] != second[1]  # an unmarked cell's numbers count
    assert comparable({"cells": printing("lost 1.25 s\n")})["cells"][0] != first[0]  # and a marked cell's words


def test_rewriting_a_twin_keeps_a_timing_cells_figures_when_only_they_changed(tmp_path):
    # each run prints another time: the twin written again must be the same file, not a diff of figures
    page = tmp_path / "page.md"
    timing = "import time\nprint(f'took {time.perf_counter_ns()} ns')  # timing: varies\n"
    page.write_text(f"# t\n\n```python\n{timing}```\n\n```python\nprint('words')\n```\n", encoding="utf-8")
    twin = page.with_suffix(".ipynb")

    def rewrite():
        subprocess.run([sys.executable, str(REPO / "tests" / "notebooks.py"), str(page)], check=True)
        return twin.read_text(encoding="utf-8")

    first = rewrite()
    assert rewrite() == first
    page.write_text(page.read_text(encoding="utf-8").replace("# t\n", "# t\n\n```python\nx = 1\n```\n"))
    moved = json.loads(rewrite())["cells"][3]  # a cell before it: the figures stay all the same
    assert moved["outputs"] == json.loads(first)["cells"][2]["outputs"] and moved["execution_count"] == 3
    page.write_text(page.read_text(encoding="utf-8").replace("took", "lost"), encoding="utf-8")
    reworded = rewrite()  # its words changed: its output is the new run's
    assert "lost " in reworded and "took " not in reworded
    page.write_text(page.read_text(encoding="utf-8").replace("'words'", "'other words'"), encoding="utf-8")
    assert "other words" in rewrite()  # an ordinary cell is always run afresh


@pytest.mark.parametrize("name", ["missing.md", "page.ipynb"])
def test_rewriting_what_is_no_page_is_one_line_and_writes_nothing(tmp_path, name):
    (tmp_path / "page.ipynb").write_text("{}", encoding="utf-8")  # a twin: never rewritten as its own page
    ran = subprocess.run([sys.executable, str(REPO / "tests" / "notebooks.py"), str(tmp_path / name)],
                         capture_output=True, text=True)
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1 and "give docs/NN-NAME.md" in ran.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["page.ipynb"]
    assert (tmp_path / "page.ipynb").read_text(encoding="utf-8") == "{}"


def test_a_failing_cell_fails_the_notebook():
    page = "# t\n\n```python\nx = 1\n```\n\nprose\n\n```python\n>>> x + 1\n2\n>>> x.nope\n3\n\n```\n"
    cells = cells_of(page)
    assert [c["cell_type"] for c in cells] == ["markdown", "code", "markdown", "code", "code"]
    with pytest.raises(AttributeError, match="nope"):
        run_notebook(cells)
    ran = run_notebook(cells[:4])
    assert ran[3]["outputs"][0]["data"] == {"text/plain": ["2"]}


def test_an_expected_exception_is_printed_so_run_all_goes_on():
    page = "```python\n>>> int('x')\nTraceback (most recent call last):\n  ...\nValueError: bad\n\n```\n"
    (cell,) = run_notebook(cells_of(page))
    assert cell["outputs"][0]["text"] == ["ValueError: invalid literal for int() with base 10: 'x'\n"]


def test_a_value_is_stored_as_jupyter_shows_it():
    # Jupyter (IPython's pretty printer) cuts a container wider than 79 columns one item to a line, indenting by
    # bracket depth, sorts a set, and leaves what fits alone; the strings below are what IPython printed for them
    page = """```python
>>> [f"{b:08b}" for b in "é中😀".encode("utf-8")[:5]] + ["1" * 20]
>>> {"attn": {"c_attn": {"w": (16, 48), "b": (48,)}, "c_proj": {"w": (16, 16), "b": (16,)}}, "ln_1": {"g": (16,)}}
>>> {3, 1, 2}, (7,), [256] * 3
>>> "x" * 100

```
"""
    shown = ["".join(cell["outputs"][0]["data"]["text/plain"]) for cell in run_notebook(cells_of(page))]
    assert shown == [
        "['11000011',\n '10101001',\n '11100100',\n '10111000',\n '10101101',\n '11111111111111111111']",
        "{'attn': {'c_attn': {'w': (16, 48), 'b': (48,)},\n  'c_proj': {'w': (16, 16), 'b': (16,)}},\n"
        " 'ln_1': {'g': (16,)}}",
        "({1, 2, 3}, (7,), [256, 256, 256])",
        repr("x" * 100)]  # a string is never cut


def test_show_renders_spans_with_the_ids_of_encode():
    text = "Not all <b>heroes</b> wear capes.<|endoftext|>\n"
    shown = show(text, "cl100k_base")
    ids = tiktoken.get_encoding("cl100k_base").encode(text, allowed_special="all")
    assert shown.ids == ids
    html = shown._repr_html_()
    assert [int(i) for i in re.findall(r'data-token-id="(\d+)"', html)] == ids
    assert "<b>" not in html and "</b>" not in html and html.count("&lt;") == 3  # escaped, not markup
    assert html.count("background:#1f2937") == 1  # the special token, drawn apart
    assert repr(shown) == render_show(text, "cl100k_base")


def test_compare_and_explain_render_and_print():
    text = "        return x  # indented"
    compared = compare(text, ["gpt2", "o200k_base"])
    assert repr(compared) == "\n".join(compare_lines(text, [("gpt2", "GPT-2"), ("o200k_base", "GPT-4o")]))
    html = compared._repr_html_()
    assert "outline:2px solid" in html and html.count("data-token-id") == sum(map(len, compared.ids.values()))
    explained = explain("Not all heroes wear capes.")
    assert repr(explained) == "\n".join(explain_lines("Not all heroes wear capes."))
    assert "<td>1451</td>" in explained._repr_html_() and "itself a token" in explained._repr_html_()


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_pre_tokens_ids_are_encodes(name):
    enc = get_encoding(name)
    for file in sorted(p.name for p in CORPUS.glob("*.txt")):
        text = corpus_text(file, 20_000) + "<|endoftext|>x"
        pieces = pre_tokens(text, enc)
        assert "".join(p.text for p in pieces) == text
        assert [i for p in pieces for i in p.ids] == enc.encode(text, allowed_special="all"), file
