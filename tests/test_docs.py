"""Every ```python block in docs/*.md runs, so the walkthroughs cannot rot.

The blocks of one file run in order in one namespace, in a fresh interpreter with the repository root as the
working directory (what a reader pasting them would have). A block written as a doctest (``>>>`` lines with
the output below them) has that output checked; other blocks check themselves with ``assert``.

Run one file by hand: ``python tests/test_docs.py docs/01-characters-to-bpe.md``.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted((REPO / "docs").glob("[0-9][0-9]-*.md"))  # the walkthroughs
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
EXPECTED_DOCS = ["01-characters-to-bpe.md", "02-unicode-regex-special-tokens.md", "03-gpt2-vocab-files.md",
                 "04-three-spellings-of-bpe.md", "05-training-cs336.md", "06-ids-to-next-token.md",
                 "07-the-model-taken-apart.md"]


def python_blocks(markdown: str) -> list[tuple[int, str]]:
    """(line number of the block's first code line, code) for each ```python block."""
    return [(markdown.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in PYTHON_BLOCK.finditer(markdown)]


# `print(pieces)  # ['Not', ' all']`: a comment that starts as a value does ([ ( { ' " or a digit) is the output the
# page promises for that line, which a reader takes on trust; other comments (`# head 0: ...`) are prose
PRINT_CLAIM = re.compile(r"^print\(.*\)\s+#\s+(?P<claim>[\[({'\"0-9].*?)\s*$")


def checked_prints(code: str) -> str:
    """``code`` with each one-line top-level ``print(...)  # output`` checking that it prints that output."""
    lines = code.split("\n")
    for node in ast.parse(code).body:
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "print" and node.lineno == node.end_lineno:
            claim = PRINT_CLAIM.match(lines[node.lineno - 1])
            if claim:  # print(ARGS)  # CLAIM -> __printed__('CLAIM', ARGS)  # CLAIM, on the same line
                lines[node.lineno - 1] = f"__printed__({claim['claim']!r}, " + lines[node.lineno - 1][len("print(") :]
    return "\n".join(lines)


def printed(claim: str, *args, **kwargs) -> None:
    """print(*args, **kwargs), failing when what it prints is not ``claim``."""
    out = io.StringIO()
    print(*args, **kwargs, file=out)
    sys.stdout.write(out.getvalue())
    shown = out.getvalue().rstrip("\n")
    if shown != claim:
        raise AssertionError(f"this line prints {shown!r}; its comment says {claim!r}")


def run_markdown(path: str) -> None:
    """Run the blocks of ``path``; exit non-zero at the first failure, naming the doc line."""
    path = Path(path)
    namespace: dict = {"__name__": "__doc_walkthrough__", "__printed__": printed}
    # outputs compared exactly, as a reader sees them: a space inside a printed string is part of the lesson
    # (NORMALIZE_WHITESPACE let a table show '   ' where the code prints '  '); "..." only under +ELLIPSIS
    runner = doctest.DocTestRunner(optionflags=0)
    for line, code in python_blocks(path.read_text(encoding="utf-8")):
        if re.search(r"^>>> ", code, re.M):
            test = doctest.DocTestParser().get_doctest(code, namespace, f"{path.name}:{line}", str(path), line - 1)
            failed = runner.run(test, clear_globs=False).failed
            namespace.update(test.globs)  # DocTest ran in a copy of the namespace: keep what it defined
            if failed:
                sys.exit(f"{path}:{line}: a doctest block printed something else (see above)")
        else:
            # blank lines in front make tracebacks point at the markdown's own line numbers
            exec(compile("\n" * (line - 1) + checked_prints(code), str(path), "exec"), namespace)


def run_in_subprocess(path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, __file__, str(path)], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )


def test_the_walkthroughs_exist():
    assert [p.name for p in DOCS] == EXPECTED_DOCS
    for path in DOCS:
        assert len(python_blocks(path.read_text(encoding="utf-8"))) >= 4, path


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_doc_code_runs(path):
    result = run_in_subprocess(path)
    assert result.returncode == 0, f"{path.name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


@pytest.mark.parametrize(
    "block, message",
    [
        (">>> 1 + 1\n3\n", "printed something else"),
        (">>> print(repr('a  b'))\n'a   b'\n", "printed something else"),  # spaces count
        (">>> print('a  b')\na b\n", "printed something else"),
        (">>> print('abc')\na...\n", "printed something else"),  # no wildcard unless the block asks for one
        ("x = 1\nassert x == 2, 'x is not 2'\n", "x is not 2"),
        ("print([1 + 1, 'two'])  # [3, 'two']\n", "its comment says \"[3, 'two']\""),  # a promised output, checked
        ("y = undefined_name\n", "NameError"),
    ],
)
def test_a_wrong_doc_fails(tmp_path, block, message):
    """The runner itself must be able to fail: a wrong output, a false assert, an error."""
    doc = tmp_path / "bad.md"
    doc.write_text(f"# A doc\n\n```python\nvalue = 41\n```\n\nText.\n\n```python\n{block}```\n", encoding="utf-8")
    result = run_in_subprocess(doc)
    assert result.returncode != 0 and message in result.stdout + result.stderr
    assert "bad.md" in result.stdout + result.stderr


def test_the_training_walkthrough_without_the_test_corpus_says_what_to_get_in_one_line(tmp_path):
    """docs/05 trains on ../shared/corpus/en_docs.txt, which a checkout alone lacks: its first block stopped with a
    bare FileNotFoundError traceback; now one line names the file looked for and how to supply it."""
    first_block = python_blocks((REPO / "docs" / "05-training-cs336.md").read_text(encoding="utf-8"))[0][1]
    doc = tmp_path / "first-block.md"
    doc.write_text(f"```python\n{first_block}```\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "TOKENIZER_SHARED_DIR": str(tmp_path / "no-shared")}
    result = subprocess.run([sys.executable, __file__, str(doc)], capture_output=True, text=True, env=env, cwd=REPO,
                            timeout=300)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (f"{tmp_path / 'no-shared' / 'corpus' / 'en_docs.txt'} not found: this walkthrough trains "
                             "on the test corpus corpus/en_docs.txt; put the shared test data beside the checkout as "
                             "../shared, or set TOKENIZER_SHARED_DIR to it\n")


def test_blocks_share_one_namespace(tmp_path):
    doc = tmp_path / "ok.md"
    doc.write_text("```python\nvalue = 41\n```\n\n```python\n>>> value + 1\n42\n```\n", encoding="utf-8")
    assert run_in_subprocess(doc).returncode == 0


@pytest.mark.exhaustive  # trains twice and generates with a tiny GPT-2: some 20 s
def test_the_readmes_python_examples_run(tmp_path):
    """README.md's python blocks, run in order as the walkthroughs' are, in a folder holding the files they name: a
    tiny 124M in the models folder ($GPT2_MODELS_DIR), data.txt, corpus.txt and big.txt (the fortunes that start
    the shared corpus), GPT-2's encoder.json and vocab.bpe, Llama 3's tokenizer.json at path/to/llama3/. Nothing
    ran them: the train_bpe example (train, save, load) failed on that text, tokenizer.load refusing the saved
    folder (merge #7066 b'<' + b'||>' makes b'<||>', which is not in the vocab)."""
    from conftest import SHARED, corpus_text
    from tiny_checkpoint import write_tiny_checkpoint

    write_tiny_checkpoint(tmp_path / "models" / "124M", n_ctx=64, n_embd=32, n_head=2, seed=7)
    for name in ("data.txt", "corpus.txt", "big.txt"):
        (tmp_path / name).write_text(corpus_text("en_docs.txt", 100_000), encoding="utf-8")
    for name in ("encoder.json", "vocab.bpe"):
        shutil.copy(REPO / "tokenizer" / "data" / name, tmp_path / name)
    (tmp_path / "path" / "to" / "llama3").mkdir(parents=True)
    shutil.copy(SHARED / "encodings" / "hf" / "llama3" / "tokenizer.json", tmp_path / "path" / "to" / "llama3")
    # NumPy's products: the compiled kernel's first load is not what this checks
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPT2_MODELS_DIR": str(tmp_path / "models"),
           "GPT2_COMPILED_MATVEC": "0"}
    result = subprocess.run([sys.executable, __file__, str(REPO / "README.md")], capture_output=True, text=True,
                            env=env, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, f"README.md failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert (tmp_path / "my-tokenizer" / "vocab.bpe").is_file()  # the training example saved its tokenizer


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    run_markdown(sys.argv[1])


def test_the_readme_states_the_python_version_pyproject_requires():
    """The README's "Python ≥ X" (every mention) is pyproject's requires-python (3.11: the stdlib ``re``
    split's possessive quantifiers need it)."""
    import tomllib

    required = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    stated = set(re.findall(r"Python ≥ ?(3\.\d+)", (REPO / "README.md").read_text(encoding="utf-8")))
    assert required == ">=3.11" and stated == {"3.11"}


def test_every_readme_block_that_installs_the_test_extra_takes_torchs_cpu_build_first():
    """The test extra pins torch, and on Linux PyPI's torch is the CUDA build (several GB of nvidia-* wheels): each
    README block that installs the extra first installs the pinned version from PyTorch's CPU index (the Quick
    start's and the Test section's did not), and so does requirements-dev.txt's comment."""
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    pin = next(requirement for requirement in extras["bench"] if requirement.startswith("torch=="))
    cpu_build = f"pip install {pin} --index-url https://download.pytorch.org/whl/cpu"
    blocks = re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.S)
    installing = [block.splitlines() for block in blocks if ".[test]" in block]
    assert len(installing) == 3  # Quick start, Install, Test
    for lines in installing:
        first = next(i for i, line in enumerate(lines) if ".[test]" in line)
        assert any(line.startswith(cpu_build) for line in lines[:first]), lines
    assert cpu_build in (REPO / "requirements-dev.txt").read_text(encoding="utf-8")


LOCAL_LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)(?:#[^)]*)?\)")


def test_every_local_link_in_the_readme_and_docs_leads_to_a_file():
    """A walkthrough renamed or a page moved must not leave a link to nothing behind it."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        for target in LOCAL_LINK.findall(page.read_text(encoding="utf-8")):
            assert (page.parent / target).exists(), f"{page.relative_to(REPO)} links to {target}, which does not exist"
            checked += 1
    assert checked >= 10  # the README's curriculum alone links every walkthrough


README_POINTER = re.compile(r"Walkthrough (\d\d)(?: ends with|'s section (\d+))[^:\n]*: ([^\n]*)")


def test_the_readmes_pointers_into_a_walkthrough_lead_to_the_section_that_holds_what_they_name():
    """"Walkthrough 01 ends with a student's round trip" while a section (the notebook, the browser) came after it:
    a README sentence that sends the reader to a walkthrough's end, or to its section N, names code (in backticks)
    that this section shows."""
    pointers = README_POINTER.findall((REPO / "README.md").read_text(encoding="utf-8"))
    assert pointers  # the round trip's, at least
    for number, section, named in pointers:
        (walkthrough,) = (REPO / "docs").glob(f"{number}-*.md")
        sections = re.split(r"^## ", walkthrough.read_text(encoding="utf-8"), flags=re.M)[1:]
        meant = [text for text in sections if text.startswith(f"{section}. ")] if section else sections[-1:]
        assert len(meant) == 1, f"README: {walkthrough.name} has no section {section}"
        for code in re.findall(r"`([^`]+)`", named):
            assert code in meant[0], f"README: {code} is not in the section of {walkthrough.name} it points to"


def test_every_line_of_vocab_bpe_a_walkthrough_names_holds_the_merge_it_says():
    """docs/04 called `Ġhero es`, merge #10,025, "line 10,025 of vocab.bpe": the merges are numbered from 0 after
    the header line, so merge #r is line r + 2 of the file (counted from 1, as an editor counts), and line 10,025
    holds another merge. Each "line N of `vocab.bpe`, `MERGE`" names the merge on that line, and each "merge #R
    ... line N of vocab.bpe" has N = R + 2."""
    file_lines = (REPO / "tokenizer" / "data" / "vocab.bpe").read_text(encoding="utf-8").split("\n")
    checked = 0
    for page in DOCS:
        text = " ".join(page.read_text(encoding="utf-8").split())
        for line, merge in re.findall(r"line ([\d,]+) of `vocab\.bpe`, `([^`]+)`", text):
            assert file_lines[int(line.replace(",", "")) - 1] == merge, f"{page.name}: line {line} is not {merge!r}"
            checked += 1
        for number, line in re.findall(r"merge #([\d,]+)[^.;#]{0,30}?\bline ([\d,]+) of `?vocab\.bpe", text):
            assert int(line.replace(",", "")) == int(number.replace(",", "")) + 2, f"{page.name}: merge #{number}"
            checked += 1
    assert checked >= 5


# The seed curriculum's functions (OpenAI's encoder.py, Karpathy's tokenizer lecture, picoGPT) -> the walkthrough
# that teaches each and the function of this repository that does that step (the one the product calls)
CURRICULUM = {
    "bytes_to_unicode": ("03", "tokenizer.vocab_files", "bytes_to_unicode"),
    "get_pairs": ("04", "gpt2_numpy.encoder", "get_pairs"),
    "bpe": ("04", "gpt2_numpy.encoder", "Encoder.bpe"),
    "get_stats": ("01", "tokenizer.training.reference", "count_pairs"),
    "merge": ("01", "tokenizer.training.reference", "merge_pair"),
    "gelu": ("07", "gpt2_numpy.model", "gelu"),
    "softmax": ("07", "gpt2_numpy.model", "softmax"),
    "layer_norm": ("07", "gpt2_numpy.model", "layer_norm"),
    "linear": ("07", "gpt2_numpy.model", "linear"),
    "ffn": ("07", "gpt2_numpy.model", "ffn"),
    "attention": ("07", "gpt2_numpy.model", "attention"),
    "mha": ("07", "gpt2_numpy.model", "mha"),
    "transformer_block": ("07", "gpt2_numpy.model", "transformer_block"),
    "gpt2": ("07", "gpt2_numpy.model", "gpt2"),
    "generate": ("07", "gpt2_numpy.model", "generate_reference"),
    "load_encoder_hparams_and_params": ("07", "gpt2_numpy.checkpoints", "load_encoder_hparams_and_params"),
}


# CS336's steps have no names of their own: the walkthrough that teaches a step names the function of this
# repository that does it, with its file
CS336_STEPS = {
    "special tokens split first, pre-tokenize, count": ("02", "tokenizer/training/counting.py", "count_pretokens"),
    "merge with the lexicographic tie-break": ("01", "tokenizer/training/reference.py", "learn_merges_reference"),
}


@pytest.mark.parametrize("step", CS336_STEPS)
def test_a_cs336_step_is_found_in_its_walkthrough_with_the_file_and_function_that_do_it(step):
    number, file, function = CS336_STEPS[step]
    module = importlib.import_module(file.removesuffix(".py").replace("/", "."))
    assert callable(getattr(module, function))
    (page,) = (REPO / "docs").glob(f"{number}-*.md")
    paragraphs = page.read_text(encoding="utf-8").split("\n\n")
    assert any(f"`{function}`" in text and f"`{file}`" in text for text in paragraphs), (
        f"{page.name} does not name `{function}` with its file `{file}`, which does CS336's step: {step}")


@pytest.mark.parametrize("name", CURRICULUM)
def test_a_function_the_curriculum_names_is_found_in_its_walkthrough_under_its_name_here(name):
    """A learner coming from Karpathy's lecture looks for `get_stats` and `merge`: the walkthrough that teaches a
    curriculum's function names it, in one paragraph with this repository's function for that step, which
    exists, and names the file that function is in."""
    number, module, ours = CURRICULUM[name]
    found = importlib.import_module(module)
    for attribute in ours.split("."):
        found = getattr(found, attribute)
    assert callable(found)
    (page,) = (REPO / "docs").glob(f"{number}-*.md")
    paragraphs = page.read_text(encoding="utf-8").split("\n\n")
    short = ours.split(".")[-1]
    assert any(re.search(rf"`[\w.]*\b{name}[`(]", text) and re.search(rf"\b{short}\b", text) for text in paragraphs), (
        f"{page.name} names neither `{name}` nor, beside it, {short}, which does that step here")
    file = module.replace(".", "/") + ".py"
    assert f"`{file}`" in " ".join(paragraphs), f"{page.name} does not say that {short} is in `{file}`"


def layout(tree):
    """A params tree's keys in their order, with each array's shape: what "the same layout" means."""
    if isinstance(tree, dict):
        return [(key, layout(value)) for key, value in tree.items()]
    if isinstance(tree, list):
        return [layout(value) for value in tree]
    return tree.shape


def test_the_toy_checkpoint_of_06_has_the_layout_the_loader_gives(tmp_path):
    """06 builds its toy params tree "with exactly the layout of the real checkpoints": the same keys, nesting and
    order as load_encoder_hparams_and_params gives for a checkpoint in OpenAI's format (its blocks once came as
    attn, mlp, ln_1, ln_2 where the loader's are ln_1, attn, ln_2, mlp), or in Hugging Face's."""
    from gpt2_numpy.checkpoints import load_encoder_hparams_and_params
    from gpt2_numpy.encoder import PACKAGED
    from gpt2_numpy.hfmodel import save_hf_folder
    from gpt2_numpy.tfcheckpoint import write_checkpoint

    namespace: dict = {"__name__": "__doc_walkthrough__"}
    for _, code in python_blocks((REPO / "docs" / "06-ids-to-next-token.md").read_text(encoding="utf-8")):
        if "params" in namespace:
            break
        exec(code, namespace)
    toy, hparams = namespace["params"], namespace["hparams"]

    def tensors(tree, name):  # the tree under OpenAI's names: blocks are h0, h1, ..., a dense w is [1, n_in, n_out]
        if isinstance(tree, dict):
            return {k: v for key, value in tree.items() for k, v in tensors(value, f"{name}/{key}").items()}
        if isinstance(tree, list):
            return {k: v for i, value in enumerate(tree) for k, v in tensors(value, f"{name}/h{i}").items()}
        return {name.replace("/blocks", ""): tree[None] if name.endswith("/w") else tree}

    folder = tmp_path / "toy"
    folder.mkdir()
    write_checkpoint(folder / "model.ckpt", tensors(toy, "model"))
    (folder / "checkpoint").write_text('model_checkpoint_path: "model.ckpt"\n')
    (folder / "hparams.json").write_text(json.dumps(hparams))
    for name in ("encoder.json", "vocab.bpe"):
        shutil.copy(PACKAGED / name, folder / name)
    _, _, loaded = load_encoder_hparams_and_params(str(folder))
    assert layout(toy) == layout(loaded)
    assert list(toy["blocks"][0]) == ["ln_1", "attn", "ln_2", "mlp"]  # the order a block uses them
    # and a Hugging Face folder of the same model loads to the same tree (it gave blocks, wte, wpe, ln_f, and
    # blocks of ln_1, ln_2, attn, mlp)
    vocab = json.loads((PACKAGED / "encoder.json").read_text(encoding="utf-8"))
    merges = [tuple(line.split()) for line in (PACKAGED / "vocab.bpe").read_text(encoding="utf-8").splitlines()[1:]
              if line]
    save_hf_folder(tmp_path / "toy-hf", hparams, toy, vocab, merges)
    _, _, loaded_hf = load_encoder_hparams_and_params(str(tmp_path / "toy-hf"))
    assert layout(loaded_hf) == layout(toy)


# picoGPT's gpt2.py, function by function, and the function of gpt2_numpy/model.py that 07 runs for each
PICOGPT_FUNCTIONS = {"gelu": "gelu", "softmax": "softmax", "layer_norm": "layer_norm", "linear": "linear",
                     "ffn": "ffn", "attention": "attention", "mha": "mha", "transformer_block": "transformer_block",
                     "gpt2": "gpt2", "generate": "generate_reference"}


def code_of(block: str) -> str:
    """A block's Python: a doctest block's examples, else the block itself."""
    if re.search(r"^>>> ", block, re.M):
        return "".join(example.source for example in doctest.DocTestParser().get_examples(block))
    return block


def model_functions_run(page: str) -> tuple[set[str], set[str]]:
    """The names a page's code imports from gpt2_numpy.model, and the plain names it calls."""
    trees = [ast.parse(code_of(code)) for _, code in python_blocks(page)]
    imported = {alias.name for tree in trees for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "gpt2_numpy.model" for alias in node.names}
    called = {node.func.id for tree in trees for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    return imported, called


def test_07_runs_each_of_picogpts_functions_as_model_py_has_it_and_prints_the_shapes_it_returns():
    """A reader who knows picoGPT's gpt2.py finds each of its functions run in 07, imported from the file the gpt2
    command runs; and in "each function on its own", every cell that runs one prints the shapes it returns (the
    page promised "the shape of everything it returns", which its cells only asserted: a notebook showed none),
    with the figures on the page checked as they print (checked_prints)."""
    page = (REPO / "docs" / "07-the-model-taken-apart.md").read_text(encoding="utf-8")
    imported, called = model_functions_run(page)
    for picogpt, ours in PICOGPT_FUNCTIONS.items():
        assert ours in imported and ours in called, f"07 does not run {ours} of gpt2_numpy/model.py ({picogpt})"
    section = page[page.index("\n## 3. ") : page.index("\n## 4. ")]
    for line, code in python_blocks(section):
        runs = {node.func.id for node in ast.walk(ast.parse(code_of(code)))
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)} & set(PICOGPT_FUNCTIONS.values())
        if runs and ">>> " not in code:  # (a doctest block shows its value)
            prints = [text for text in code.splitlines() if PRINT_CLAIM.match(text) and ".shape" in text]
            assert prints, f"07 §3, the block running {sorted(runs)} prints no shape:\n{code}"
    assert "softmax(np.array(" in section and "gelu(np.array(" in section  # each also on a few numbers of its own


def test_06_runs_the_model_functions_it_names_from_model_py():
    """06 said "softmax turns its scores into probabilities" and computed them by hand: the functions a page names
    are the product's own (gpt2_numpy/model.py), imported and run, not a copy a reader cannot find there."""
    page = (REPO / "docs" / "06-ids-to-next-token.md").read_text(encoding="utf-8")
    imported, called = model_functions_run(page)
    prose = re.sub(r"^```.*?^```", "", page, flags=re.S | re.M)
    named = {name for name in PICOGPT_FUNCTIONS.values() if re.search(rf"`{name}[`(]", prose)} | {"softmax"}
    assert named <= imported & called, f"06 names {sorted(named - (imported & called))} without running model.py's"


def test_a_piece_is_a_pre_token_in_the_prose():
    """01 opened with "it cuts text into pieces (tokens)" while 03, 04 and the README call a pre-token a piece
    (encoding one piece, the whole-piece rule, the piece cache), and 02 called chunks of a stream pieces: in the
    walkthroughs' prose, "piece" is said only where a pre-token is meant, in a paragraph that says so, or in the
    names the code gives it."""
    for page in DOCS:
        prose = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        for paragraph in re.split(r"\n\s*\n", prose):
            plain = re.sub(r"whole-piece|piece cache|`[^`]*`", "", paragraph)
            if re.search(r"\bpieces?\b", plain, re.I):
                assert "pre-token" in paragraph, f"{page.name}: a piece that is no pre-token:\n{paragraph}"


def test_a_merges_place_has_one_name():
    """The README's table and 04's called a merge's place in the list a "merge index" where 03, explain and the
    playground call it its merge number (`merge #`): one thing, one name, in the walkthroughs and the README."""
    for page in [*DOCS, REPO / "README.md"]:
        text = " ".join(page.read_text(encoding="utf-8").split())
        assert not re.search(r"merge (index|position)", text, re.I), f"{page.name}: say merge number"


def test_07_calls_softmaxs_weights_what_its_run_shows_them_to_be():
    """07 said softmax's weights are "positive", where its own cells show the masked ones exactly 0: the paragraph
    that introduces softmax says they are never negative, and that the mask's get exactly 0."""
    import numpy as np

    from gpt2_numpy.model import causal_mask, softmax

    weights = softmax(np.ones((4, 4), np.float32) + causal_mask(4))
    assert np.all(weights >= 0) and np.all(np.triu(weights, k=1) == 0)  # what the paragraph must describe
    page = (REPO / "docs" / "07-the-model-taken-apart.md").read_text(encoding="utf-8")
    paragraph = " ".join(page[page.index("**`softmax`**") :].split("```")[0].split())
    assert "positive" not in paragraph and "never negative" in paragraph and "exactly 0" in paragraph, paragraph


def test_the_docs_prose_and_the_teaching_code_keep_to_120_characters_a_line():
    """The project's width is 120 characters: prose lines of docs/*.md (code blocks and tables, which cannot be cut,
    aside) ran to 468, and the teaching code and the notebook maker to 129."""
    too_long = []
    for page in sorted((REPO / "docs").glob("*.md")):
        in_code = False
        for number, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
            elif not in_code and not line.lstrip().startswith("|") and len(line) > 120:
                too_long.append(f"docs/{page.name}:{number} ({len(line)})")
    for name in ("tests/notebooks.py", "tests/test_teach.py", "tokenizer/teach.py"):
        lines = (REPO / name).read_text(encoding="utf-8").split("\n")
        too_long += [f"{name}:{number} ({len(line)})" for number, line in enumerate(lines, 1) if len(line) > 120]
    assert not too_long, too_long
