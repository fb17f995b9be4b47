"""Test setup shared by every test file.

- The tests need ``../shared`` beside the checkout (or ``$TOKENIZER_SHARED_DIR``): OpenAI's vocabulary files
  in ``encodings/`` and the test corpora in ``corpus/`` (its README says where each file comes from). Without
  it, pytest stops at once with one line that says so.
- Points the tokenizer (``$TOKENIZER_DATA_DIR``, unless set) and tiktoken, the oracle (a private
  ``$TIKTOKEN_CACHE_DIR`` seeded from those files, unless set), at them, so the whole suite runs offline:
  ``python -m pytest`` is the whole command.
- Under ``CI=true`` a skipped test counts as a failure: a test that does not run cannot fail.
- ``FUZZ_EXAMPLES``: hypothesis examples per fuzz test (10,000 in CI, fewer on a laptop).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOKENIZER_SHARED_DIR") or REPO.parent / "shared").absolute()
CORPUS = SHARED / "corpus"
ENCODINGS_DIR = SHARED / "encodings"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
FUZZ_EXAMPLES = 10_000 if IN_CI else int(os.environ.get("FUZZ_EXAMPLES", "300"))
# For the many fuzz tests of the array paths, each example of which runs several paths and their oracles: a
# quarter of the budget each (2,500 in CI) keeps the suite within its time.
FUZZ_SHARE = max(FUZZ_EXAMPLES // 4, 50)

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

os.environ.setdefault("TOKENIZER_DATA_DIR", str(ENCODINGS_DIR))
# A private download cache: tests never touch the user's ~/.cache.
os.environ.setdefault("TOKENIZER_CACHE_DIR", tempfile.mkdtemp(prefix="tokenizer-cache-"))


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
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        tiktoken_cache = tempfile.mkdtemp(prefix="tiktoken-cache-")
        subprocess.run([sys.executable, str(ENCODINGS_DIR / "seed_tiktoken_cache.py"), tiktoken_cache],
                       check=True, capture_output=True)
        os.environ["TIKTOKEN_CACHE_DIR"] = tiktoken_cache
    # A shell without job control starts a background job (`.ci/run &`) with Ctrl-C ignored, and children inherit
    # that: the Ctrl-C tests would then test nothing. Give this session, and so its children, the usual handler.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which counts as a failure: {report.longrepr}"


def corpus_text(name: str, limit: int | None = None) -> str:
    """A corpus file (or its first ``limit`` bytes, cut at a character boundary) as text."""
    data = (CORPUS / name).read_bytes()
    if limit is not None:
        data = data[:limit]
    return data.decode("utf-8", errors="ignore")


CORPUS_FILES = sorted(p.name for p in CORPUS.glob("*.txt"))
