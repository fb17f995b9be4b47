"""Where the benchmarks find the checkout and the shared data: ``../shared`` beside the checkout, or
``$TOKENIZER_SHARED_DIR``, as tests/conftest.py finds them (its README lists the vocabulary files and corpora).

Each benchmark runs as a script (``python bench/bench_x.py``), so this folder is first on its path and
``from shared_data import ...`` finds this module. It reads nothing itself.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOKENIZER_SHARED_DIR") or REPO.parent / "shared")
CORPUS = SHARED / "corpus"
