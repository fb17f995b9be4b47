"""Named encodings (``gpt2``, ``cl100k_base``, ...) and where their vocabulary files come from.

Every OpenAI vocabulary file ships inside this package (``tokenizer/data/``: GPT-2's ``encoder.json`` and
``vocab.bpe``, ``r50k_base``, ``p50k_base``, ``cl100k_base`` and ``o200k_base``'s ``.tiktoken``), so every named
encoding loads with no network and no setting. A folder the user names is still read first
(:func:`vocab_file_path`):

1. ``$TOKENIZER_DATA_DIR/<file>`` — a folder laid out like OpenAI's (``r50k_base.tiktoken``, ...);
2. tiktoken's cache, when ``$TIKTOKEN_CACHE_DIR`` (else ``$DATA_GYM_CACHE_DIR``) names it, where tiktoken names
   each file by the sha1 of its URL on OpenAI's storage;
3. the copy in this package;

and, for a copy of the package without its data files, as before they shipped:

4. the user cache, ``$TOKENIZER_CACHE_DIR`` or ``~/.cache/gpt2-tokenizer``;
5. tiktoken's default cache, ``data-gym-cache`` in the temporary folder (``tempfile.gettempdir()``);
   ``TIKTOKEN_CACHE_DIR=""`` turns tiktoken's cache off, in steps 2 and 5;
6. OpenAI's public storage (the URLs tiktoken uses; ``$OPENAIPUBLIC_URL`` replaces the host for mirrors),
   downloaded into the user cache.

Every file is checked against its known sha256 (tiktoken's expected hashes) before it is used, wherever it came
from. Once parsed, a file's tokens are kept in the user cache under that sha256, in a form quicker to read
(:mod:`tokenizer.fast.vocab_cache`), and a later process reads that instead.

More encodings can be added by name: :func:`register_encoding` in one process, or a plugin module found by
:mod:`tokenizer.plugins` (tiktoken's ``tiktoken_ext`` idea).
"""

from __future__ import annotations

import errno
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from . import encoding as encoding_module
from .encoding import CORES, Encoding
from .plugins import find_plugin_constructors
from .pretokenize import CL100K_PATTERN, O200K_PATTERN, R50K_PATTERN
from .user_cache import cache_dir
from .vocab_files import read_gpt2_encoder_json, read_tiktoken_file

PACKAGE_DATA = Path(__file__).parent / "data"
DEFAULT_OPENAIPUBLIC_URL = "https://openaipublic.blob.core.windows.net"  # download.py's; not imported (slow)

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
        # gpt-oss's chat format. Like tiktoken, 200018 is both <|endofprompt|> (which decodes it) and
        # <|reserved_200018|>, so there is no n_vocab to check.
        EncodingSpec(
            "o200k_harmony", O200K, O200K_PATTERN,
            {
                ENDOFTEXT: 199999, ENDOFPROMPT: 200018,
                "<|startoftext|>": 199998, "<|reserved_200000|>": 200000, "<|reserved_200001|>": 200001,
                "<|return|>": 200002, "<|constrain|>": 200003, "<|reserved_200004|>": 200004,
                "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007, "<|message|>": 200008,
                "<|reserved_200009|>": 200009, "<|reserved_200010|>": 200010, "<|reserved_200011|>": 200011,
                "<|call|>": 200012,
            } | {f"<|reserved_{i}|>": i for i in range(200013, 201088)},
        ),
    ]
}
ALIASES = {"gpt4": "cl100k_base", "gpt-4": "cl100k_base", "gpt-4o": "o200k_base", "gpt-2": "gpt2"}

# What register_encoding and plugins take: a function returning Encoding's arguments as a dict (tiktoken's).
Constructor = Callable[[], Mapping[str, Any]]


class RegisteredEncoding(Encoding):
    """An encoding :func:`get_encoding` made: pickled as its name, not as its tables.

    The process that unpickles it calls ``get_encoding(name)`` and gets its own shared copy (loaded once, or
    already loaded), so sending an encoding to worker processes costs a few bytes. One made by a constructor
    given to :func:`register_encoding` is sent with a reference to that constructor, which the other
    process registers if it has not (so the constructor must be a module-level function to be picklable).
    """

    registered_constructor: Constructor | None = None

    def __reduce__(self):
        if self.registered_constructor is not None:
            return (_get_registered, (self.name, self.registered_constructor, self.core_name))
        return (_get_encoding, (self.name, self.core_name))

    def _registry_name(self) -> str | None:
        # tiktoken's __getstate__ gives the name only for the registry's own (shared) encoding
        return self.name if self.core_name == "fast" and _cache.get((self.name, "fast")) is self else None


_cache: dict[tuple[str, str], Encoding] = {}  # (name, core) -> the shared encoding
_registered: dict[str, Constructor] = {}  # by register_encoding
_lock = threading.RLock()  # reentrant: a constructor may call get_encoding for a base encoding


def list_encoding_names() -> list[str]:
    """The names ``get_encoding`` accepts (aliases such as ``"gpt4"`` aside): the built-in encodings, then
    those given to :func:`register_encoding`, then those of plugins (:mod:`tokenizer.plugins`).

    >>> list_encoding_names()[:7]
    ['gpt2', 'r50k_base', 'p50k_base', 'p50k_edit', 'cl100k_base', 'o200k_base', 'o200k_harmony']
    """
    return list({**dict.fromkeys(ENCODINGS), **dict.fromkeys(_registered), **dict.fromkeys(_plugins())})


def get_encoding(encoding_name: str, *, core: str = "fast") -> Encoding:
    """The named encoding, loaded once and shared.

    ``core="reference"`` gives the same encoding over the readable core (:mod:`tokenizer.core`): the same ids,
    slowly, with no NumPy and nothing of :mod:`tokenizer.fast` loaded.

    >>> get_encoding("gpt2").encode("hello world")
    [31373, 995]
    >>> get_encoding("gpt2", core="reference").encode("hello world")
    [31373, 995]
    """
    if not isinstance(encoding_name, str):
        raise TypeError(f"encoding_name must be a string such as 'gpt2', got {type(encoding_name).__name__}")
    if core not in CORES:
        raise ValueError(f"core must be one of {', '.join(map(repr, CORES))}, got {core!r}")
    name = ALIASES.get(encoding_name, encoding_name)
    with _lock:
        if (name, core) in _cache:
            return _cache[name, core]
        if name in ENCODINGS:
            enc = _build(ENCODINGS[name], core)
        elif name in _registered:
            enc = _build_from_constructor(name, _registered[name], origin="register_encoding", core=core)
            enc.registered_constructor = _registered[name]
        else:
            plugins = _plugins()
            if name not in plugins:
                known = ", ".join([*ENCODINGS, *ALIASES, *_registered, *plugins])
                raise ValueError(f"Unknown encoding {encoding_name!r}. Known encodings: {known}")
            module, constructor = plugins[name]
            enc = _build_from_constructor(name, constructor, origin=f"tokenizer plugin {module}", core=core)
        _cache[name, core] = enc
        return enc


encoding_module.encoding_by_name = get_encoding  # tiktoken's __setstate__ of a name: the shared encoding


def is_registered(enc: Encoding) -> bool:
    """Whether ``enc`` is the registry's own encoding of its name (what :func:`get_encoding` returns), rather
    than a tokenizer read from files, which bears its folder's name, and that may be a registered name.
    Looked up among the encodings loaded so far: asking never loads (or downloads) the registered one."""
    with _lock:
        return _cache.get((enc.name, enc.core_name)) is enc


def shown_names(encodings) -> list[str]:
    """The name each of ``encodings`` is shown under, one per encoding, so that no two tokenizers share a name:
    a registered encoding's own name; a saved tokenizer's name, or ``"NAME (saved)"`` (then ``"NAME (saved
    2)"``, ...) when a registered encoding, an alias of one (``gpt4``: typed back, the name would give
    cl100k_base) or an earlier saved tokenizer has that name. The same encoding given twice is shown under the
    same name."""
    registered = {*list_encoding_names(), *ALIASES}
    taken: dict[int, str] = {}  # id(a saved tokenizer) -> the name it is shown under
    names = []
    for enc in encodings:
        if is_registered(enc):
            names.append(enc.name)
            continue
        if id(enc) not in taken:
            name, copies = enc.name, 1
            while name in registered or name in taken.values():
                name = f"{enc.name} (saved)" if copies == 1 else f"{enc.name} (saved {copies})"
                copies += 1
            taken[id(enc)] = name
        names.append(taken[id(enc)])
    return names


def _get_encoding(name: str, core: str) -> Encoding:
    """Unpickling an encoding of the registry: the same one, shared, in this process."""
    return get_encoding(name, core=core)


def register_encoding(name: str, constructor: Constructor) -> None:
    """Make ``get_encoding(name)`` return ``Encoding(**constructor())``, built on first use and shared.

    ``constructor`` returns ``Encoding``'s arguments as a dict (``pat_str``, ``mergeable_ranks``,
    ``special_tokens``, optionally ``name`` and ``explicit_n_vocab``): the contract of tiktoken's plugin
    constructors. For an encoding every process should know, write a plugin module instead
    (:mod:`tokenizer.plugins`). For example::

        def byte_level():
            return {"pat_str": r"\\S+|\\s+", "mergeable_ranks": {bytes([b]): b for b in range(256)},
                    "special_tokens": {"<|endoftext|>": 256}}

        register_encoding("byte_level", byte_level)
        get_encoding("byte_level").encode("hi")  # [104, 105]
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty string, got {name!r}")
    if not callable(constructor):
        raise TypeError(f"constructor must be a function returning Encoding's arguments, got {constructor!r}")
    with _lock:
        if name in ENCODINGS or name in ALIASES or name in _registered:
            raise ValueError(f"encoding {name!r} is already registered; choose another name")
        _registered[name] = constructor


def _get_registered(name: str, constructor: Constructor, core: str = "fast") -> Encoding:
    """Unpickling a registered encoding: register its constructor here too if needed, then get it."""
    with _lock:
        _registered.setdefault(name, constructor)
    return get_encoding(name, core=core)


def _plugins() -> dict[str, tuple[str, Constructor]]:
    plugins = find_plugin_constructors()
    clash = next((n for n in plugins if n in ENCODINGS or n in ALIASES or n in _registered), None)
    if clash is not None:
        raise ValueError(f"tokenizer plugin {plugins[clash][0]} defines encoding {clash!r}, which is already "
                         "registered; rename it")
    return plugins


def _build_from_constructor(name: str, constructor: Constructor, *, origin: str, core: str) -> RegisteredEncoding:
    kwargs = constructor()
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"the constructor of encoding {name!r} ({origin}) must return a dict of Encoding's "
                        f"arguments, got {type(kwargs).__name__}")
    kwargs = dict(kwargs)
    if kwargs.setdefault("name", name) != name:
        raise ValueError(f"the constructor of encoding {name!r} ({origin}) returned name {kwargs['name']!r}; "
                         "the two must be the same")
    allowed = {"name", "pat_str", "mergeable_ranks", "special_tokens", "explicit_n_vocab"}
    if set(kwargs) - allowed or not {"pat_str", "mergeable_ranks", "special_tokens"} <= set(kwargs):
        raise ValueError(f"the constructor of encoding {name!r} ({origin}) returned keys {sorted(kwargs)}; "
                         f"expected pat_str, mergeable_ranks, special_tokens and optionally explicit_n_vocab")
    return RegisteredEncoding(kwargs.pop("name"), **kwargs, core=core)


def _build(spec: EncodingSpec, core: str) -> Encoding:
    if core == "reference":
        ranks = _read_vocab_file(spec.vocab)
    else:
        # A file checked and parsed before was saved in a form quick to read back (most of a fresh process's
        # get_encoding was the parse); else it is found, checked, parsed and saved now.
        from .fast import vocab_cache

        ranks = vocab_cache.load_saved(spec.vocab.sha256)
        if ranks is None:
            ranks = _read_vocab_file(spec.vocab)
            vocab_cache.save(spec.vocab.sha256, ranks)
    encoding = RegisteredEncoding(
        spec.name,
        pat_str=spec.pat_str,
        mergeable_ranks=ranks,
        special_tokens=spec.special_tokens,
        explicit_n_vocab=spec.n_vocab,
        core=core,
    )
    if core == "fast":
        # the file was checked against its sha256 (vocab_file_path: now, or before its parse was saved), so
        # that names the vocabulary read from it: its batch BPE tables are found on disk by that name
        encoding.core.vocabulary_source = f"{spec.vocab.name} sha256 {spec.vocab.sha256}"
    return encoding


def _read_vocab_file(vocab: VocabFile) -> dict[bytes, int]:
    """A vocabulary file's ranks, the file found and checked (:func:`vocab_file_path`), then parsed."""
    path = vocab_file_path(vocab)
    if vocab.name.endswith(".json"):
        ranks, _ = read_gpt2_encoder_json(path)
        return ranks
    return read_tiktoken_file(path)


def vocab_file_path(vocab: VocabFile) -> Path:
    """A verified local copy of ``vocab``: the first found of the places the module's docstring lists.

    A copy the user pointed at (``$TOKENIZER_DATA_DIR``) or this package's own copy with the wrong sha256 is an
    error (:class:`tokenizer.download.ChecksumError`): the one the user chose, or the installation, is damaged,
    and reading another copy would hide it. A damaged copy in a cache is passed over (a cache's owner replaces
    it: tiktoken, or the download below).
    """
    # imported here: requests and tqdm cost ~0.1 s, and the packaged files never need them
    from .download import DownloadError, download_file, openai_public_url

    data_dir = os.environ.get("TOKENIZER_DATA_DIR")
    if data_dir and (Path(data_dir) / vocab.name).exists():
        return _verified(Path(data_dir) / vocab.name, vocab, advice="replace it, or unset TOKENIZER_DATA_DIR")
    tiktokens = tiktoken_cache_path(vocab)
    named_by_user = "TIKTOKEN_CACHE_DIR" in os.environ or "DATA_GYM_CACHE_DIR" in os.environ
    if named_by_user and _good_copy(tiktokens, vocab):
        return tiktokens
    shipped = PACKAGE_DATA / Path(vocab.name).name
    if shipped.exists():
        # gpt2-numpy is installed from a checkout or a wheel built from one, not from an index, so the advice
        # names that source: `pip install --force-reinstall gpt2-numpy` would ask PyPI for the name
        return _verified(shipped, vocab, advice="the package's copy is damaged: restore it (in a checkout, git "
                                                "checkout -- tokenizer/data; an installed copy, pip install "
                                                "--force-reinstall --no-deps with the checkout or wheel it came "
                                                "from), or set TOKENIZER_DATA_DIR to a folder holding a good copy")
    cached = cache_dir() / vocab.name
    if _good_copy(cached, vocab):
        return cached
    if not named_by_user and _good_copy(tiktokens, vocab):
        return tiktokens  # a damaged copy there is tiktoken's to replace: left alone, and downloaded below
    url = openai_public_url(vocab.remote)
    try:
        # (a full disk's bytes are dropped, not kept to resume: a vocabulary file is a few MB, and a half file on a
        # full disk only holds on to the space; download_file drops them while no other run can take the file up)
        return download_file(url, cached, sha256=vocab.sha256, desc=vocab.name, keep_part_on_full_disk=False)
    except DownloadError as e:
        raise DownloadError(f"{e} Or set TOKENIZER_DATA_DIR to a folder that holds {vocab.name}, or "
                            "TIKTOKEN_CACHE_DIR to a tiktoken cache that holds it.") from e
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # A write's error names no file ("No space left on device"); the bytes received are gone already
        raise DownloadError(f"cannot save {vocab.name}, downloaded from {url}, as {cached}: {e.strerror}; free "
                            f"space in {cached.parent}, or set TOKENIZER_CACHE_DIR to a folder on a disk with room "
                            f"(or TOKENIZER_DATA_DIR to a folder that holds {vocab.name})",
                            reason=e.strerror) from None


def _good_copy(path: Path | None, vocab: VocabFile) -> bool:
    from .download import sha256_file

    return path is not None and path.is_file() and sha256_file(path) == vocab.sha256


def tiktoken_cache_path(vocab: VocabFile) -> Path | None:
    """Where tiktoken keeps its copy of ``vocab`` (whether or not it is there); None if its cache is off.

    tiktoken's folder is ``$TIKTOKEN_CACHE_DIR``, else ``$DATA_GYM_CACHE_DIR``, else ``data-gym-cache`` in the
    temporary folder; an empty ``$TIKTOKEN_CACHE_DIR`` turns its cache off. The file is named by the sha1 of
    the URL tiktoken reads it from, always on OpenAI's own host.
    """
    import hashlib
    import tempfile

    if "TIKTOKEN_CACHE_DIR" in os.environ:
        folder = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        folder = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        folder = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not folder:
        return None
    url = f"{DEFAULT_OPENAIPUBLIC_URL}/{vocab.remote}"
    return Path(folder) / hashlib.sha1(url.encode()).hexdigest()


def _verified(path: Path, vocab: VocabFile, *, advice: str) -> Path:
    from .download import ChecksumError, sha256_file

    actual = sha256_file(path)
    if actual != vocab.sha256:
        raise ChecksumError(f"{path}: sha256 is {actual}, expected {vocab.sha256} for {vocab.name} (the file is "
                            f"corrupt or not OpenAI's); {advice}")
    return path
