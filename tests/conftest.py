"""Test setup shared by every test file.

- The tests need ``../shared`` beside the checkout (or ``$TOKENIZER_SHARED_DIR``): OpenAI's vocabulary files
  in ``encodings/`` and the test corpora in ``corpus/`` (its README says where each file comes from). Without
  it, pytest stops at once with one line that says so.
- Points the tokenizer (``$TOKENIZER_DATA_DIR``, unless set) and tiktoken, the oracle (a private
  ``$TIKTOKEN_CACHE_DIR`` seeded from those files, unless set), at them, so the whole suite runs offline:
  ``python -m pytest`` is the whole command.
- Under ``CI=true`` a test that did not run counts as a failure, a test file skipped whole and a passing
  ``xfail`` too (tests/ci_outcomes.py): a test that does not run cannot fail.
- The fast core's compiled BPE is off (``$TOKENIZER_COMPILED_BPE=0``) unless a test turns it on.
- ``FUZZ_EXAMPLES``: hypothesis examples per fuzz test (100 unless ``$FUZZ_EXAMPLES`` says otherwise; CI's
  exhaustive run reruns every fuzz test with 200, twice the everyday tier's).
- Two tiers. ``python -m pytest`` runs the everyday tier: every fast path against its oracle on real samples,
  and every command in this process (the ``cli`` fixture), in about three and a half to four minutes on two cores.
  ``python -m pytest -m exhaustive`` runs the rest, listed in :data:`EXHAUSTIVE` below: sweeps over every code
  point, whole corpora and whole matrices, every command again in its own process, the browser, Ray,
  TensorFlow, installing the package. CI runs both.
"""

from __future__ import annotations

import atexit
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ci_outcomes import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401 - hooks

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOKENIZER_SHARED_DIR") or REPO.parent / "shared").absolute()
CORPUS = SHARED / "corpus"
ENCODINGS_DIR = SHARED / "encodings"
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "100"))
# For the many fuzz tests of the array paths, each example of which runs several paths and their oracles: a
# quarter of the budget each keeps the suite within its time.
FUZZ_SHARE = max(FUZZ_EXAMPLES // 4, 50)

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

os.environ.setdefault("TOKENIZER_DATA_DIR", str(ENCODINGS_DIR))


def private_folder(prefix: str) -> str:
    """A new temporary folder, removed when this process ends: the caches below hold up to a few hundred MB a
    run (pair tables, compiled kernels), which runs one after another would otherwise pile up in /tmp."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


# A private download cache: tests never touch the user's ~/.cache.
if "TOKENIZER_CACHE_DIR" not in os.environ:  # made once: workers and the suite's own pytest runs inherit it
    os.environ["TOKENIZER_CACHE_DIR"] = private_folder("tokenizer-cache-")
# The fast core's compiled BPE comes to a process only after much new text (tokenizer/fast/compiled_bpe.py), so
# which BPE a test met would depend on the tests before it in its worker: off, unless asked for (the tests of
# the kernel ask for it; TOKENIZER_COMPILED_BPE=1 runs the whole suite with it).
os.environ.setdefault("TOKENIZER_COMPILED_BPE", "0")
# Likewise the decoder's compiled matrix-vector kernel (gpt2_numpy/compiled_matvec.py) arrives in the background
# at some point of a run: off, so a test decodes on NumPy, unless it asks (tests/test_matvec_kernel.py does).
os.environ.setdefault("GPT2_COMPILED_MATVEC", "0")


def pytest_configure(config):
    needed = [ENCODINGS_DIR / "gpt2" / "encoder.json", ENCODINGS_DIR / "cl100k_base.tiktoken",
              ENCODINGS_DIR / "seed_tiktoken_cache.py", CORPUS / "en_docs.txt"]
    missing = [path for path in needed if not path.is_file()]
    if missing:
        raise pytest.UsageError(
            f"the tests need the shared data folder at {SHARED} (missing: {missing[0]}): OpenAI's vocabulary "
            "files in encodings/ and the test corpora in corpus/, which every developer and CI have beside the "
            "checkout as ../shared; put a copy there, or set TOKENIZER_SHARED_DIR to one"
        )
    if not CORPUS_FILES:
        raise pytest.UsageError(f"no corpus files (*.txt) in {CORPUS}; the tests loop over them")
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        tiktoken_cache = private_folder("tiktoken-cache-")
        subprocess.run([sys.executable, str(ENCODINGS_DIR / "seed_tiktoken_cache.py"), tiktoken_cache],
                       check=True, capture_output=True)
        os.environ["TIKTOKEN_CACHE_DIR"] = tiktoken_cache
    # A shell without job control starts a background job (`.ci/run &`) with Ctrl-C ignored, and children inherit
    # that: the Ctrl-C tests would then test nothing. Give this session, and so its children, the usual handler.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# The exhaustive tier, by what a test needs or sweeps: its name holds one of these words, or it uses one of these
# fixtures, or it is in one of these files, or it is named here, or one of its parameters is "ray" (a Ray
# cluster) or "own_process" (a command run end to end in its own process: the ``cli`` fixture below runs each
# command in this process in the everyday tier, and in its own in this one). A test file may also mark some
# parameters of a matrix exhaustive itself (``pytest.param(..., marks=pytest.mark.exhaustive)``), where the
# everyday tier takes a sample of it: test_parity.py, test_batch_bpe.py.
EXHAUSTIVE_WORDS = ("every_code_point", "every_bmp_code_point", "every_prefix", "bounded_memory", "20_mb",
                    "every_corpus", "every_distinct_piece", "ray_engine", "chunking", "chunk_size")
EXHAUSTIVE_FIXTURES = ("browser", "ray_cluster")  # a browser; a Ray cluster
# pip install; TensorFlow as the oracle; the decoder's kernel, compiled anew per run (10-40 s)
EXHAUSTIVE_FILES = ("test_package.py", "test_tfcheckpoint.py", "test_matvec_kernel.py")
EXHAUSTIVE = {
    # commands end to end
    "test_cli.py": ("test_train_killed_then_resumed_ends_with_the_same_merges",
                    # Ctrl-C in a process of its own: the everyday tier keeps encode-file's (and, in this
                    # process, train's message)
                    "test_ctrl_c_while_the_workers_start_leaves_no_process",
                    "test_ctrl_c_during_train_is_one_line_and_saves_nothing"),
    "test_gpt2.py": ("test_cli_end_to_end_on_a_tiny_checkpoint",),
    # picoGPT's own gpt2.py run as a script (the everyday tier checks its main in this process)
    "test_picogpt.py": ("test_picogpts_own_gpt2_py_runs_on_our_utils_and_encoder",),
    # whole corpora, where the everyday tier takes samples
    "test_parity.py": ("test_corpus_ids_equal_whole_files",),
    "test_batch_bpe.py": ("test_char_windows_never_cut_what_a_token_spans_on_the_corpora",
                          "test_pair_table_of_openai_ranks_equals_the_obvious_one"),
    "test_hfmodel.py": ("test_openai_folder_by_path_and_cli_save_hf",),
    # sweeps: every ASCII pair and triple; encode_with_unstable at many cut points of real text
    "test_pretokenize.py": ("test_every_ascii_pair_and_triple",),
    "test_tiktoken_surface.py": ("test_encode_with_unstable_on_real_text",),
    # the trainer's compiled merge loop: compiling it takes 20-40 s of the machine's two cores on a fresh one
    "test_train.py": ("test_fast_merges_equal_the_reference", "test_fast_merges_equal_the_reference_on_long_runs",
                      "test_compiled_merges_equal_the_reference_when_its_arrays_grow",
                      "test_compiled_and_numpy_merges_equal_on_real_text",
                      "test_compiled_merges_with_64_bit_weights_equal_numpys",
                      "test_a_large_job_compiles_in_the_background_and_a_later_one_loads_it",
                      "test_without_numba_the_numpy_merge_loop_runs"),
    "test_hand_worked_merges.py": ("test_the_compiled_loop_learns_the_hand_worked_merges",),
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        filename = item.path.name
        name = item.originalname
        params = getattr(getattr(item, "callspec", None), "params", {})
        if (filename in EXHAUSTIVE_FILES or name in EXHAUSTIVE.get(filename, ())
                or any(word in name for word in EXHAUSTIVE_WORDS)
                or any(fixture in item.fixturenames for fixture in EXHAUSTIVE_FIXTURES)
                or "ray" in params.values() or "own_process" in params.values()
                or params.get("compiled") is True or params.get("ready_at") is not None):
            item.add_marker(pytest.mark.exhaustive)
        if getattr(item.obj, "is_hypothesis_test", False):
            item.add_marker(pytest.mark.fuzz)


def corpus_text(name: str, limit: int | None = None) -> str:
    """A corpus file (or its first ``limit`` bytes, cut at a character boundary) as text."""
    data = (CORPUS / name).read_bytes()
    if limit is not None:
        data = data[:limit]
    return data.decode("utf-8", errors="ignore")


# A test looping over the corpora must not pass by looping over nothing: no corpus, no run (pytest_configure).
CORPUS_FILES = sorted(p.name for p in CORPUS.glob("*.txt"))


def interrupt(proc: subprocess.Popen, *, timeout: float = 60) -> tuple:
    """Ctrl-C as a terminal sends it: SIGINT to the process group of ``proc`` (started with
    ``start_new_session=True``: the command and its workers); its ``(stdout, stderr)`` once it has ended. One still
    running ``timeout`` seconds later is killed, group and all, and the test fails: no test leaves a process
    running (which would otherwise be found, and warned of, only when the test run ends)."""
    assert os.getpgid(proc.pid) == proc.pid, "start the command with start_new_session=True"
    os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"{proc.args} still ran {timeout} s after Ctrl-C; killed") from None


PROG = "python -m tokenizer"


def run_command(args, *, cwd, own_process: bool, stdin: bytes | None = None,
                env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m tokenizer *args`` in the folder ``cwd``: its exit status and its output as text, as a user gets
    them. ``own_process``: a new Python process, started as a user starts it. Otherwise :func:`tokenizer.cli.main`
    in this process, with what it sees set up as that process would see it (the folder; ``NO_COLOR`` unset;
    stdout and stderr that are pipes, not terminals, with a ``.buffer``; stdin from ``stdin``, or empty) and put
    back afterwards; an exit of argparse's is its status, as it would be the process's. ``env``: variables for
    the new process (own process only)."""
    if own_process:
        full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        full_env.pop("NO_COLOR", None)
        return subprocess.run([sys.executable, "-m", "tokenizer", *args], cwd=cwd, env=full_env,
                              input=stdin if stdin is not None else b"", capture_output=True, timeout=600)
    assert env is None, "env reaches only a command in its own process"
    from tokenizer.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    # As Python sets them up for pipes: UTF-8 here; stdout strict, stderr backslashreplace and line buffered
    stdout = io.TextIOWrapper(out, encoding="utf-8", errors="strict")
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", line_buffering=True)
    stdin_file = io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8")
    saved = os.getcwd(), os.environ.get("NO_COLOR"), sys.stdin, sys.stdout, sys.stderr
    os.chdir(cwd)
    os.environ.pop("NO_COLOR", None)
    sys.stdin, sys.stdout, sys.stderr = stdin_file, stdout, stderr
    try:
        try:
            status = main(list(args), prog=PROG)
        except SystemExit as e:  # as the interpreter turns it into an exit status
            status = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        stdout.flush()
        stderr.flush()
    finally:
        cwd_before, no_color, sys.stdin, sys.stdout, sys.stderr = saved
        os.chdir(cwd_before)
        if no_color is not None:
            os.environ["NO_COLOR"] = no_color
    return subprocess.CompletedProcess(list(args), status, out.getvalue(), err.getvalue())


@pytest.fixture(params=["in_process", "own_process"])
def cli(request, tmp_path):
    """``cli(*args)`` runs ``python -m tokenizer *args`` in ``tmp_path`` (not the checkout) and checks its exit
    status (``status``; a mistake, 2: one line); ``stdin``: bytes to read. Each test that uses it runs twice: the
    command in this process (the everyday tier) and in its own (``own_process``: the exhaustive tier)."""
    own_process = request.param == "own_process"

    def run(*args, status=0, stdin: bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
        return check_command(run_command(args, cwd=tmp_path, own_process=own_process, stdin=stdin, env=env), status)

    run.own_process = own_process
    return run


def check_command(proc: subprocess.CompletedProcess, status: int) -> subprocess.CompletedProcess:
    """``proc`` (from :func:`run_command`) with its output as text (newlines read as ``text=True`` reads them),
    once its exit status is ``status``; a mistake (2) must be said in one line that names the program."""
    stdout, stderr = (io.TextIOWrapper(io.BytesIO(b), encoding="utf-8").read() for b in (proc.stdout, proc.stderr))
    assert proc.returncode == status, stderr
    if status == 2:  # a mistake: exactly one line, naming the program, never a traceback
        assert stderr.count("\n") == 1 and stderr.startswith(PROG), stderr
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
