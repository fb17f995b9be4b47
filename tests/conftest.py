"""Test setup shared by every test file.

- Makes the repository importable and points the tokenizer and tiktoken (the oracle) at ``../shared``'s
  vocabulary files, so the whole suite runs offline.
- Under ``CI=true`` a skipped test counts as a failure: a test that does not run cannot fail.
- ``FUZZ_EXAMPLES``: hypothesis examples per fuzz test (10,000 in CI, fewer on a laptop).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The vocabulary files and corpora (read-only); TOKENIZER_SHARED_DIR points elsewhere, e.g. from a git worktree.
SHARED = Path(os.environ.get("TOKENIZER_SHARED_DIR", REPO.parent / "shared"))
CORPUS = SHARED / "corpus"
ENCODINGS_DIR = SHARED / "encodings"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
FUZZ_EXAMPLES = 10_000 if IN_CI else int(os.environ.get("FUZZ_EXAMPLES", "300"))

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

os.environ.setdefault("TOKENIZER_DATA_DIR", str(ENCODINGS_DIR))
# A private download cache: tests never touch the user's ~/.cache.
os.environ.setdefault("TOKENIZER_CACHE_DIR", tempfile.mkdtemp(prefix="tokenizer-cache-"))
if "TIKTOKEN_CACHE_DIR" not in os.environ:
    _tiktoken_cache = tempfile.mkdtemp(prefix="tiktoken-cache-")
    subprocess.run(
        [sys.executable, str(ENCODINGS_DIR / "seed_tiktoken_cache.py"), _tiktoken_cache],
        check=True,
        capture_output=True,
    )
    os.environ["TIKTOKEN_CACHE_DIR"] = _tiktoken_cache


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
