"""Walkthrough notebooks, made from the walkthroughs' markdown and run the way Jupyter runs them.

A notebook (``docs/01-characters-to-bpe.ipynb``) is its markdown page (``docs/01-characters-to-bpe.md``) cut into
cells: prose into markdown cells, each ``>>>`` example and each plain code block into a code cell, with the
outputs that running the cells in order gives (a value as Jupyter prints it, :func:`shown`: a container too wide for
a line is cut one item to a line, not left as its one-line ``repr``; and its ``_repr_html_`` when it has one).
An example that expects an exception becomes ``try``/``except`` that prints it, so "Run all" goes to the end. A
first code cell moves to the repository root, where the page's code runs: Jupyter starts a notebook in its own
folder, docs/. tests/test_notebooks.py runs the cells again and checks the notebook is exactly
what this makes: neither the page nor the code can change without the notebook showing it. A cell that prints a
timing says so with the comment ``# timing: ...`` (``VARIES``): its printed numbers are compared as ``N``
(:func:`comparable`), the rest of its output as it is; and rewriting a notebook keeps such a cell's stored output
when only its numbers changed (:func:`with_stored_timings`), so a regenerated twin differs only where the page did.

    python tests/notebooks.py docs/01-characters-to-bpe.md     # (re)writes docs/01-characters-to-bpe.ipynb

What it does not do: run a Jupyter kernel (the cells run with ``exec`` in one namespace).
"""

from __future__ import annotations

import ast
import doctest
import io
import json
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path

BLOCK = re.compile(r"^```python\n(.*?)^```\n", re.S | re.M)
VARIES = "# timing:"  # in a cell whose printed figures differ from run to run (a measured time)
NUMBER = re.compile(r"\d+(?:\.\d+)?")


# Jupyter starts a notebook's kernel in the notebook's folder (docs/), where the page's code, written to run from
# the repository root, would not find its files (tokenizer/data/vocab.bpe, README.md, ../shared): each notebook
# therefore opens with this cell, which moves to the root (and, as a kernel imports from its working folder, makes
# the checkout's packages importable there). At the root it does nothing.
TO_THE_ROOT = """\
# This walkthrough's code runs from the repository root; Jupyter starts a notebook in docs/, so go up first
import os
from pathlib import Path

if Path.cwd().name == "docs" and (Path.cwd().parent / "tokenizer").is_dir():
    os.chdir(Path.cwd().parent)
"""


def cells_of(markdown: str) -> list[dict]:
    """The page cut into notebook cells (without outputs)."""
    cells, start = [], 0
    for block in BLOCK.finditer(markdown):
        cells.append(markdown_cell(markdown[start : block.start()]))
        code = block.group(1)
        if code.lstrip().startswith(">>>"):
            cells += [code_cell(example_source(e)) for e in doctest.DocTestParser().get_examples(code)]
        else:
            cells.append(code_cell(code))
        start = block.end()
    cells.append(markdown_cell(markdown[start:]))
    return [cell for cell in cells if "".join(cell["source"]).strip()]


def example_source(example: doctest.Example) -> str:
    if example.exc_msg is None:
        return example.source
    error = example.exc_msg.split(":")[0]
    body = "".join(f"    {line}\n" for line in example.source.splitlines())
    return (f"try:\n{body}except {error} as error:  # the error the page shows, printed\n"
            f"    print(f\"{error}: {{error}}\")\n")


def markdown_cell(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": lines(text.strip("\n") + "\n")}


def code_cell(source: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": lines(source.rstrip("\n"))}


def lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def run_cell(source: str, namespace: dict, count: int) -> list[dict]:
    """Run one cell as Jupyter does: its statements, then its last line's value shown (unless None)."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    stdout, value = io.StringIO(), None
    with redirect_stdout(stdout):
        exec(compile(tree, "<cell>", "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
    outputs = []
    if stdout.getvalue():
        outputs.append({"name": "stdout", "output_type": "stream", "text": lines(stdout.getvalue())})
    if value is not None:
        data = {"text/plain": lines(shown(value))}
        if hasattr(value, "_repr_html_"):
            data["text/html"] = lines(value._repr_html_())
        outputs.append({"data": data, "execution_count": count, "metadata": {}, "output_type": "execute_result"})
    return outputs


# Jupyter shows a cell's value with IPython's pretty printer, not repr(): a list, tuple, dict or set that does not fit
# in 79 columns is cut after its commas, one item to a line, so a learner's run looks like this and not like the
# one long line repr() gives. Everything else (a str, an array, tokenizer.teach's objects) is shown as its repr().
# (Not followed: IPython's quirks with a container as a dict's key, an array's repr inside a container, and
# containers of over 1,000 items, which no walkthrough shows.)
JUPYTER_WIDTH = 79
BRACKETS = {list: ("[", "]"), tuple: ("(", ")"), dict: ("{", "}"), set: ("{", "}"), frozenset: ("frozenset({", "})")}


def shown(value) -> str:
    """The text/plain Jupyter shows for ``value``."""
    return laid_out(value, column=0, indent=0, after=0)


def items_of(value) -> list[tuple[str, object]]:
    """A container's items as (text before the item, item): a dict's key with its ": ", in the dict's order; a
    set's elements in sorted order when they sort, as IPython shows them."""
    if isinstance(value, dict):
        return [(flat(key) + ": ", item) for key, item in value.items()]
    if isinstance(value, (set, frozenset)):
        try:
            return [("", item) for item in sorted(value)]
        except TypeError:  # elements of kinds that do not compare keep the set's order
            pass
    return [("", item) for item in value]


def brackets_of(value) -> tuple[str, str]:
    start, end = BRACKETS[type(value)]
    return start, ("," if type(value) is tuple and len(value) == 1 else "") + end  # (1,)


def flat(value) -> str:
    """``value`` on one line: repr(), but with a set's elements sorted, at any depth. A subclass (a namedtuple, a
    Counter) and an empty container are their repr(), as in IPython."""
    if type(value) not in BRACKETS or not value:
        return repr(value)
    start, end = brackets_of(value)
    return start + ", ".join(before + flat(item) for before, item in items_of(value)) + end


def laid_out(value, column: int, indent: int, after: int) -> str:
    """``value`` printed from ``column``, its broken lines indented by ``indent`` (IPython indents by the depth of
    brackets, not to the column), with ``after`` characters that must follow it on its last line (a comma, closing
    brackets): on one line if that fits in JUPYTER_WIDTH, else one item to a line, each laid out the same way."""
    one_line = flat(value)
    fits = "\n" not in one_line and column + len(one_line) + after <= JUPYTER_WIDTH  # an array's repr never fits
    if type(value) not in BRACKETS or not value or fits:
        return one_line.replace("\n", "\n" + " " * indent)  # a repr of many lines continues at the indent
    start, end = brackets_of(value)
    items = items_of(value)
    inner_indent = indent + len(start)
    text, column = start, column + len(start)
    for number, (before, item) in enumerate(items):
        last = number == len(items) - 1
        if number:
            text += ",\n" + " " * inner_indent
            column = inner_indent
        item_text = before + laid_out(item, column + len(before), inner_indent, len(end) + after if last else 1)
        text += item_text
        # the column its last line ends at (a broken item's last line starts at the left margin)
        column = len(item_text.rsplit("\n", 1)[-1]) if "\n" in item_text else column + len(item_text)
    return text + end


def run_notebook(cells: list[dict]) -> list[dict]:
    """The cells with the outputs of running them in order, in one namespace."""
    namespace: dict = {"__name__": "__main__"}
    count = 0
    ran = []
    for cell in cells:
        if cell["cell_type"] == "code":
            count += 1
            source = "".join(cell["source"])
            outputs = run_cell(source, namespace, count)
            cell = {**cell, "execution_count": count, "outputs": outputs}
        ran.append(cell)
    return ran


def notebook(markdown: str) -> dict:
    """The walkthrough's notebook: its page's cells, the cell that moves to the root first (after the title's
    cell), run."""
    cells = cells_of(markdown)
    first_code = 1 if cells and cells[0]["cell_type"] == "markdown" else 0
    cells.insert(first_code, code_cell(TO_THE_ROOT))
    return {"cells": run_notebook(cells),
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 4}


def comparable(nb: dict) -> dict:
    """The notebook with every number printed by a ``VARIES`` cell replaced by ``N``: what must not change."""
    cells = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and VARIES in "".join(cell["source"]):
            outputs = [{**out, "text": [NUMBER.sub("N", line) for line in out["text"]]} if "text" in out else out
                       for out in cell["outputs"]]
            cell = {**cell, "outputs": outputs}
        cells.append(cell)
    return {**nb, "cells": cells}


def with_stored_timings(made: dict, stored: dict | None) -> dict:
    """``made`` with the printed text of each ``VARIES`` cell taken from ``stored`` (the notebook on disk) where only
    its numbers differ: the stored cell of the same source, printing the same words. Regenerating a twin then
    changes a timing line only when its words change, not with every run's measured figures (nor when cells come
    or go around it)."""
    stored_timings: dict[str, list[dict]] = {}  # a timing cell's source -> the stored cells of it, in order
    for cell in (stored or {}).get("cells", []):
        source = "".join(cell.get("source", []))
        if cell.get("cell_type") == "code" and VARIES in source and isinstance(cell.get("outputs"), list):
            stored_timings.setdefault(source, []).append(cell)
    cells = []
    for cell in made["cells"]:
        earlier = stored_timings.get("".join(cell["source"])) if cell["cell_type"] == "code" else None
        if earlier:
            old = earlier.pop(0)
            if words_of(old["outputs"]) == words_of(cell["outputs"]):
                cell = {**cell, "outputs": [{**out, "text": kept["text"]} if "text" in out else out
                                            for out, kept in zip(cell["outputs"], old["outputs"])]}
        cells.append(cell)
    return {**made, "cells": cells}


def words_of(outputs: list[dict]) -> list:
    """A cell's outputs as :func:`comparable` compares a timing cell's (printed numbers as ``N``), without the
    execution count, which moves when cells come or go before it."""
    return [{key: [NUMBER.sub("N", line) for line in value] if key == "text" else value
             for key, value in out.items() if key != "execution_count"} for out in outputs]


def dumps(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def stored_notebook(path: Path) -> dict | None:
    """The notebook at ``path``, or None when there is none to keep figures from (absent, or not JSON)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's package, as the tests use
    for name in sys.argv[1:]:
        page = Path(name)
        if page.suffix != ".md" or not page.is_file():  # else a traceback, or a page's twin written over it
            print(f"notebooks.py: {name} is not a walkthrough's markdown page; give docs/NN-NAME.md", file=sys.stderr)
            sys.exit(2)
        twin = page.with_suffix(".ipynb")
        made = with_stored_timings(notebook(page.read_text(encoding="utf-8")), stored_notebook(twin))
        twin.write_text(dumps(made), encoding="utf-8")
