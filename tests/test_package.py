"""``pip install .`` and ``pip install -e .`` work, and the installed commands run from any folder.

Each test builds and installs a copy of the project into a fresh virtual environment under ``tmp_path``,
offline: ``--no-deps --no-build-isolation`` (the build backend, setuptools, is in the test extra). The new
environment borrows the running one's packages (numpy, regex, ...) through a ``.pth`` file rather than
``venv --system-site-packages``, which would give it the *base* interpreter's packages: under CI the tests run
in a venv, and numpy is not in the base interpreter.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import REPO
from tokenizer import registry, serve
from tokenizer.version import VERSION

HELLO_IDS = "15496 11 995"  # "Hello, world" in GPT-2's vocabulary


def project_copy(tmp_path: Path) -> Path:
    """What a fresh clone holds of the product, copied so that building leaves the checkout untouched."""
    copy = tmp_path / "src"
    copy.mkdir()
    for path in REPO.glob("*.py"):
        shutil.copy(path, copy)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, copy)
    for package in ("gpt2_numpy", "tokenizer"):
        shutil.copytree(REPO / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("tests", "bench", "docs", "models", "tools"):  # what must *not* be installed, present as in a clone
        (copy / folder).mkdir()
        (copy / folder / "__init__.py").touch()
    shutil.copy(REPO / "models" / "README.md", copy / "models")  # what marks a checkout's models folder
    return copy


def make_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (site / "borrowed-packages.pth").write_text("\n".join(sorted(ours)) + "\n")
    return venv


def clean_env() -> dict:
    """The environment of a user's shell: nothing points into the checkout, no vocabulary or models folder is set."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "TOKENIZER_DATA_DIR", "GPT2_MODELS_DIR")}
    env["NO_COLOR"] = "1"
    return env


def run(command: list, cwd: Path, **env) -> subprocess.CompletedProcess:
    proc = subprocess.run(command, cwd=cwd, env={**clean_env(), **env}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def pip_install(venv: Path, *args, cwd: Path) -> None:
    run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", *args], cwd)


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    folder = tmp_path / "elsewhere"  # not the checkout, not the copy: a user's folder
    folder.mkdir()
    return folder


def test_pip_install_gives_commands_that_work_from_any_folder(tmp_path, elsewhere):
    src, venv = project_copy(tmp_path), make_venv(tmp_path)
    pip_install(venv, str(src), cwd=elsewhere)
    bin_dir = venv / "bin"

    assert run([bin_dir / "gpt2-tokenizer", "encode", "Hello, world"], elsewhere).stdout.split() == HELLO_IDS.split()
    assert run([bin_dir / "python", "-m", "tokenizer", "decode", HELLO_IDS], elsewhere).stdout == "Hello, world"
    assert run([bin_dir / "gpt2-tokenizer", "--help"], elsewhere).stdout.startswith("usage: gpt2-tokenizer")
    assert "1 token, 5 characters" in run([bin_dir / "python", "-m", "tokenizer", "show", "hello"], elsewhere).stdout

    # The installed copy is the one used (GPT-2's vocabulary files shipped inside it), and nothing else of the
    # checkout was installed as a package.
    where = run([bin_dir / "python", "-c", "import gpt2_numpy.cli, tokenizer; "
                 "print(tokenizer.__file__, gpt2_numpy.cli.__file__)"], elsewhere).stdout.split()
    site = Path(where[0]).parents[1]
    assert all(Path(p).is_relative_to(venv) for p in where), where
    assert sorted(p.name for p in (site / "tokenizer" / "data").iterdir()) == [
        "README.md", "cl100k_base.tiktoken", "encoder.json", "o200k_base.tiktoken", "p50k_base.tiktoken",
        "r50k_base.tiktoken", "vocab.bpe"]
    assert sorted(p.name for p in (site / "tokenizer" / "playground").iterdir()) == ["index.html", "playground.css",
                                                                                  "playground.js"]
    assert not any((site / name).exists() for name in ("tests", "bench", "docs", "models", "tools"))

    # --version: the version the package was built with (pyproject.toml reads tokenizer/version.py), and the
    # installed copy's folder, for both commands
    metadata_version = "import importlib.metadata; print(importlib.metadata.version('gpt2-numpy'))"
    built = run([bin_dir / "python", "-c", metadata_version], elsewhere).stdout.strip()
    assert built == VERSION
    for command in ("gpt2", "gpt2-tokenizer"):
        assert run([bin_dir / command, "--version"], elsewhere).stdout.startswith(
            f"{command} {VERSION} (gpt2-numpy, from {site}; Python ")

    # Every OpenAI encoding from the installed files alone: no variable, empty caches, nowhere to download from.
    offline = {"TIKTOKEN_CACHE_DIR": "", "TOKENIZER_CACHE_DIR": str(tmp_path / "empty-cache"),
               "OPENAIPUBLIC_URL": "http://127.0.0.1:9"}
    hello = {"r50k_base": HELLO_IDS, "p50k_edit": HELLO_IDS, "gpt-4": "9906 11 1917", "o200k_harmony": "13225 11 2375"}
    for name, ids in hello.items():
        assert run([bin_dir / "gpt2-tokenizer", "encode", "Hello, world", "--encoding", name], elsewhere,
                   **offline).stdout.split() == ids.split(), name

    # Only the two packages: no generic top-level module (gpt2, utils, encoder, crc32c, ...) that a user's file of
    # the same name, or PyPI's crc32c, could shadow or be shadowed by.
    record = next(site.glob("gpt2_numpy-*.dist-info")) / "RECORD"
    installed = {line.split(",")[0].split("/")[0] for line in record.read_text().splitlines()}
    assert installed == {"gpt2_numpy", "tokenizer", record.parent.name, ".."}, installed  # "..": bin/ scripts
    for name in ("gpt2", "utils", "encoder", "kvcache", "tfcheckpoint", "crc32c", "hfmodel"):
        assert not list(site.glob(f"{name}.py")) and not (site / name).exists(), name

    # An installed copy keeps its models in the user cache, whatever the current folder holds.
    rule = "from gpt2_numpy.models_dir import default_models_dir; print(default_models_dir())"
    (elsewhere / "models").mkdir()
    (elsewhere / "models" / "README.md").touch()
    out = run([bin_dir / "python", "-c", rule], elsewhere, XDG_CACHE_HOME=str(tmp_path / "xdg")).stdout.strip()
    assert out == str(tmp_path / "xdg" / "gpt2-numpy" / "models")


def test_both_commands_run_beside_a_users_own_crc32c_utils_and_encoder(tmp_path, elsewhere):
    """A user's crc32c.py, utils.py and encoder.py (or PyPI's crc32c) in the current folder and on sys.path: the
    installed commands import only their own packages, so neither notices."""
    src, venv = project_copy(tmp_path), make_venv(tmp_path)
    pip_install(venv, str(src), cwd=elsewhere)
    for name in ("crc32c", "utils", "encoder", "gpt2", "kvcache"):
        (elsewhere / f"{name}.py").write_text(f"raise ImportError('the user\\'s own {name}.py was imported')\n")
    shadowed = {"PYTHONPATH": str(elsewhere)}
    assert run([venv / "bin" / "gpt2", "--help"], elsewhere, **shadowed).stdout.startswith("usage: gpt2")
    assert run([venv / "bin" / "gpt2-tokenizer", "--help"], elsewhere, **shadowed).stdout.startswith(
        "usage: gpt2-tokenizer")
    assert run([venv / "bin" / "gpt2-tokenizer", "encode", "Hello, world"], elsewhere, **shadowed).stdout.split() == \
        HELLO_IDS.split()


def test_gpt2_console_script_help(tmp_path, elsewhere):
    src, venv = project_copy(tmp_path), make_venv(tmp_path)
    pip_install(venv, str(src), cwd=elsewhere)
    out = run([venv / "bin" / "gpt2", "--help"], elsewhere).stdout
    assert out.startswith("usage: gpt2") and "--temperature" in out
    assert list(elsewhere.iterdir()) == []  # --help downloads nothing into the current folder


def test_pip_install_editable(tmp_path, elsewhere):
    src, venv = project_copy(tmp_path), make_venv(tmp_path)
    pip_install(venv, "-e", str(src), cwd=elsewhere)
    assert run([venv / "bin" / "gpt2-tokenizer", "encode", "Hello, world"], elsewhere).stdout.split() == \
        HELLO_IDS.split()
    where = run([venv / "bin" / "python", "-c", "import tokenizer, gpt2_numpy; print(tokenizer.__file__, "
                 "gpt2_numpy.__file__)"], elsewhere).stdout.split()
    assert [Path(p) for p in where] == [src / "tokenizer" / "__init__.py", src / "gpt2_numpy" / "__init__.py"]
    assert run([venv / "bin" / "gpt2", "--help"], elsewhere).stdout.startswith("usage: gpt2")
    # Installed from a checkout in editable mode, models live in that checkout's models/ folder.
    rule = "from gpt2_numpy.models_dir import default_models_dir; print(default_models_dir())"
    assert run([venv / "bin" / "python", "-c", rule], elsewhere).stdout.strip() == str(src / "models")


def test_the_wheel_holds_every_file_the_code_reads_and_is_the_size_the_readme_says(tmp_path):
    """A wheel built as a user (or an index) builds it: every file of the two packages is in it, so is each file
    the code names (every vocabulary file, the playground's page), and its size is the README's."""
    src = project_copy(tmp_path)
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", str(tmp_path / "wheels"), str(src)], tmp_path)
    wheel = next((tmp_path / "wheels").glob("gpt2_numpy-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        entries = {entry.filename: entry for entry in archive.infolist()}
    in_packages = {path.relative_to(REPO).as_posix() for package in ("gpt2_numpy", "tokenizer")
                   for path in (REPO / package).rglob("*")
                   if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}
    assert in_packages - set(entries) == set()
    vocabulary_files = {f"tokenizer/data/{Path(vocab.name).name}" for vocab in vars(registry).values()
                        if isinstance(vocab, registry.VocabFile)}
    page_files = {f"tokenizer/playground/{file_name}" for file_name, _ in serve.PAGE_FILES.values()}
    assert len(vocabulary_files) == 6 and len(page_files) == 3
    assert (vocabulary_files | page_files) - set(entries) == set()

    # README, "What works offline": "That makes the wheel X MB (Y MB without these files; Z MB of vocabulary files
    # once installed)", in decimal megabytes, each to within 0.1 MB
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    stated = re.search(r"makes the wheel ([\d.]+) MB \(([\d.]+) MB without these files; ([\d.]+) MB of vocabulary "
                       r"files once installed\)", readme)
    assert stated, "the README no longer gives the wheel's size"
    wheel_bytes = wheel.stat().st_size
    without_bytes = wheel_bytes - sum(entries[name].compress_size for name in vocabulary_files)
    installed_bytes = sum(entries[name].file_size for name in vocabulary_files)
    for said, measured in zip(stated.groups(), (wheel_bytes, without_bytes, installed_bytes)):
        assert abs(float(said) - measured / 1e6) <= 0.1, (stated.group(0), wheel_bytes, without_bytes, installed_bytes)


def test_install_advice_names_packages_pip_can_find():
    """Messages, help and the README said pip install 'gpt2-numpy[half]', which fails for every user: the name is
    not on PyPI, so neither a checkout run as it is nor one installed from it can take it that way. The advice
    names the extra's own packages (tokenizer.extras, one place), the same as pyproject.toml's extras."""
    import tomllib

    from tokenizer.extras import EXTRA_PACKAGES

    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for extra, packages in EXTRA_PACKAGES.items():
        assert tuple(extras[extra]) == packages, extra
    texts = [*REPO.glob("gpt2_numpy/**/*.py"), *REPO.glob("tokenizer/**/*.py"), *REPO.glob("*.md"),
             *REPO.glob("docs/*.md"), *REPO.glob("docs/*.ipynb")]
    advising = [str(path.relative_to(REPO)) for path in texts
                if "gpt2-numpy[" in path.read_text(encoding="utf-8")]
    assert advising == []
