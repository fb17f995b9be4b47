"""Named encodings (``gpt2``, ``cl100k_base``, ...) and where their vocabulary files come from.

GPT-2's ``encoder.json`` ships inside this package. The other files are looked for, in order:

1. ``$TOKENIZER_DATA_DIR/<file>`` — a folder laid out like OpenAI's (``r50k_base.tiktoken``, ...);
2. the user cache, ``$TOKENIZER_CACHE_DIR`` or ``~/.cache/gpt2-tokenizer``;
3. OpenAI's public storage (the URLs tiktoken uses; ``$OPENAIPUBLIC_URL`` replaces the host for mirrors),
   downloaded into the cache.

Every file is checked against its known sha256 before it is used, wherever it came from.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .encoding import Encoding
from .pretokenize import CL100K_PATTERN, O200K_PATTERN, R50K_PATTERN
from .vocab_files import read_gpt2_encoder_json, read_tiktoken_file

PACKAGE_DATA = Path(__file__).parent / "data"

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True)
class VocabFile:
    """One vocabulary file: its name in a data folder, its path on OpenAI's storage and its sha256."""

    name: str
    remote: str
    sha256: str


GPT2_ENCODER_JSON = VocabFile(
    "gpt2/encoder.json", "gpt-2/encodings/main/encoder.json",
    "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
)
GPT2_VOCAB_BPE = VocabFile(
    "gpt2/vocab.bpe", "gpt-2/encodings/main/vocab.bpe",
    "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
)
R50K = VocabFile(
    "r50k_base.tiktoken", "encodings/r50k_base.tiktoken",
    "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
)
P50K = VocabFile(
    "p50k_base.tiktoken", "encodings/p50k_base.tiktoken",
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
)
CL100K = VocabFile(
    "cl100k_base.tiktoken", "encodings/cl100k_base.tiktoken",
    "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
)
O200K = VocabFile(
    "o200k_base.tiktoken", "encodings/o200k_base.tiktoken",
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
)


@dataclass(frozen=True)
class EncodingSpec:
    """What an encoding is made of."""

    name: str
    vocab: VocabFile
    pat_str: str
    special_tokens: dict[str, int] = field(default_factory=dict)
    n_vocab: int | None = None


ENCODINGS = {
    spec.name: spec
    for spec in [
        EncodingSpec("gpt2", GPT2_ENCODER_JSON, R50K_PATTERN, {ENDOFTEXT: 50256}, 50257),
        EncodingSpec("r50k_base", R50K, R50K_PATTERN, {ENDOFTEXT: 50256}, 50257),
        EncodingSpec("p50k_base", P50K, R50K_PATTERN, {ENDOFTEXT: 50256}, 50281),
        EncodingSpec(
            "p50k_edit", P50K, R50K_PATTERN,
            {ENDOFTEXT: 50256, FIM_PREFIX: 50281, FIM_MIDDLE: 50282, FIM_SUFFIX: 50283},
        ),
        EncodingSpec(
            "cl100k_base", CL100K, CL100K_PATTERN,
            {ENDOFTEXT: 100257, FIM_PREFIX: 100258, FIM_MIDDLE: 100259, FIM_SUFFIX: 100260, ENDOFPROMPT: 100276},
        ),
        EncodingSpec("o200k_base", O200K, O200K_PATTERN, {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}),
    ]
}
ALIASES = {"gpt4": "cl100k_base", "gpt-4": "cl100k_base", "gpt-4o": "o200k_base", "gpt-2": "gpt2"}

class RegisteredEncoding(Encoding):
    """An encoding :func:`get_encoding` made: pickled as its name, not as its tables.

    The process that unpickles it calls ``get_encoding(name)`` and gets its own shared copy (loaded once, or
    already loaded), so sending an encoding to worker processes costs a few bytes.
    """

    def __reduce__(self):
        return (get_encoding, (self.name,))


_cache: dict[str, Encoding] = {}
_lock = threading.Lock()


def list_encoding_names() -> list[str]:
    """The names ``get_encoding`` accepts (aliases such as ``"gpt4"`` aside).

    >>> list_encoding_names()
    ['gpt2', 'r50k_base', 'p50k_base', 'p50k_edit', 'cl100k_base', 'o200k_base']
    """
    return list(ENCODINGS)


def get_encoding(encoding_name: str) -> Encoding:
    """The named encoding, loaded once and shared.

    >>> get_encoding("gpt2").encode("hello world")
    [31373, 995]
    """
    name = ALIASES.get(encoding_name, encoding_name)
    if name not in ENCODINGS:
        known = ", ".join([*ENCODINGS, *ALIASES])
        raise ValueError(f"Unknown encoding {encoding_name!r}. Known encodings: {known}")
    with _lock:
        if name not in _cache:
            _cache[name] = _build(ENCODINGS[name])
        return _cache[name]


def _build(spec: EncodingSpec) -> Encoding:
    path = vocab_file_path(spec.vocab)
    if spec.vocab.name.endswith(".json"):
        ranks, _ = read_gpt2_encoder_json(path)
    else:
        ranks = read_tiktoken_file(path)
    return RegisteredEncoding(
        spec.name,
        pat_str=spec.pat_str,
        mergeable_ranks=ranks,
        special_tokens=spec.special_tokens,
        explicit_n_vocab=spec.n_vocab,
    )


def cache_dir() -> Path:
    """Where downloaded vocabulary files are kept."""
    if os.environ.get("TOKENIZER_CACHE_DIR"):
        return Path(os.environ["TOKENIZER_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpt2-tokenizer"


def vocab_file_path(vocab: VocabFile) -> Path:
    """A verified local copy of ``vocab``: packaged, in $TOKENIZER_DATA_DIR, cached, or downloaded now."""
    # imported here: requests and tqdm cost ~0.1 s, and the packaged GPT-2 files never need them
    from .download import DownloadError, download_file, openai_public_url, sha256_file

    if vocab in (GPT2_ENCODER_JSON, GPT2_VOCAB_BPE):
        return _verified(PACKAGE_DATA / Path(vocab.name).name, vocab)
    data_dir = os.environ.get("TOKENIZER_DATA_DIR")
    if data_dir and (Path(data_dir) / vocab.name).exists():
        return _verified(Path(data_dir) / vocab.name, vocab)
    cached = cache_dir() / vocab.name
    if cached.exists() and sha256_file(cached) == vocab.sha256:
        return cached
    url = openai_public_url(vocab.remote)
    try:
        return download_file(url, cached, sha256=vocab.sha256, desc=vocab.name)
    except DownloadError as e:
        raise DownloadError(f"{e} Or set TOKENIZER_DATA_DIR to a folder that holds {vocab.name}.") from e


def _verified(path: Path, vocab: VocabFile) -> Path:
    from .download import ChecksumError, sha256_file

    actual = sha256_file(path)
    if actual != vocab.sha256:
        raise ChecksumError(f"{path}: sha256 is {actual}, expected {vocab.sha256} for {vocab.name}; the file is corrupt or not "
                         f"OpenAI's — replace it")
    return path
