"""Which encoding an OpenAI model uses: ``encoding_for_model("gpt-4o")`` is ``get_encoding("o200k_base")``.

Two tables, as tiktoken 0.14 has them: exact model names, then name prefixes for dated or fine-tuned
variants (``"gpt-4o-2024-05-13"``, ``"ft:gpt-4o:my-org"``). An exact name wins; otherwise the first prefix
that fits, in the order written (``"ft:gpt-4o"`` before ``"ft:gpt-4"``). Prefixes match names that do not
exist (``"gpt-4-FAKE"``), as in tiktoken: the table cannot know every release.

>>> encoding_name_for_model("gpt-4o-mini")
'o200k_base'
>>> encoding_name_for_model("gpt-oss-120b")
'o200k_harmony'

This module only maps names; it does not know models' context lengths or prices, and it does not ask
OpenAI's API (the table is data, updated by hand when tiktoken's is).
"""

from __future__ import annotations

from .encoding import Encoding
from .registry import get_encoding

MODEL_TO_ENCODING: dict[str, str] = {
    # reasoning
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4-mini": "o200k_base",
    # chat
    "gpt-5": "o200k_base",
    "gpt-4.1": "o200k_base",
    "gpt-4o": "o200k_base",
    "gpt-4": "cl100k_base",
    "gpt-3.5-turbo": "cl100k_base",
    "gpt-3.5": "cl100k_base",
    "gpt-35-turbo": "cl100k_base",  # Azure's spelling
    # base
    "davinci-002": "cl100k_base",
    "babbage-002": "cl100k_base",
    # embeddings
    "text-embedding-ada-002": "cl100k_base",
    "text-embedding-3-small": "cl100k_base",
    "text-embedding-3-large": "cl100k_base",
    # deprecated: text
    "text-davinci-003": "p50k_base",
    "text-davinci-002": "p50k_base",
    "text-davinci-001": "r50k_base",
    "text-curie-001": "r50k_base",
    "text-babbage-001": "r50k_base",
    "text-ada-001": "r50k_base",
    "davinci": "r50k_base",
    "curie": "r50k_base",
    "babbage": "r50k_base",
    "ada": "r50k_base",
    # deprecated: code
    "code-davinci-002": "p50k_base",
    "code-davinci-001": "p50k_base",
    "code-cushman-002": "p50k_base",
    "code-cushman-001": "p50k_base",
    "davinci-codex": "p50k_base",
    "cushman-codex": "p50k_base",
    # deprecated: edit
    "text-davinci-edit-001": "p50k_edit",
    "code-davinci-edit-001": "p50k_edit",
    # deprecated: old embeddings
    "text-similarity-davinci-001": "r50k_base",
    "text-similarity-curie-001": "r50k_base",
    "text-similarity-babbage-001": "r50k_base",
    "text-similarity-ada-001": "r50k_base",
    "text-search-davinci-doc-001": "r50k_base",
    "text-search-curie-doc-001": "r50k_base",
    "text-search-babbage-doc-001": "r50k_base",
    "text-search-ada-doc-001": "r50k_base",
    "code-search-babbage-code-001": "r50k_base",
    "code-search-ada-code-001": "r50k_base",
    # open weights
    "gpt2": "gpt2",
    "gpt-2": "gpt2",
}

# Tried in this order after the exact names: a longer prefix must come before a shorter one it extends.
MODEL_PREFIX_TO_ENCODING: dict[str, str] = {
    "o1-": "o200k_base",
    "o3-": "o200k_base",
    "o4-mini-": "o200k_base",
    # chat
    "gpt-5": "o200k_base",
    "gpt-4.5-": "o200k_base",
    "gpt-4.1-": "o200k_base",
    "chatgpt-4o-": "o200k_base",
    "gpt-4o-": "o200k_base",  # gpt-4o-2024-05-13
    "gpt-4-": "cl100k_base",  # gpt-4-0314, gpt-4-32k
    "gpt-3.5-turbo-": "cl100k_base",  # gpt-3.5-turbo-0301
    "gpt-35-turbo-": "cl100k_base",  # Azure's spelling
    "gpt-oss-": "o200k_harmony",
    # fine-tuned
    "ft:gpt-4o": "o200k_base",
    "ft:gpt-4": "cl100k_base",
    "ft:gpt-3.5-turbo": "cl100k_base",
    "ft:davinci-002": "cl100k_base",
    "ft:babbage-002": "cl100k_base",
}


def encoding_name_for_model(model_name: str) -> str:
    """The name of the encoding ``model_name`` uses; ``KeyError`` (tiktoken's) for a model not in the table.

    >>> encoding_name_for_model("gpt-3.5-turbo-0301")
    'cl100k_base'
    """
    if not isinstance(model_name, str):
        raise TypeError(f"model_name must be a string such as 'gpt-4o', got {type(model_name).__name__}")
    if model_name in MODEL_TO_ENCODING:
        return MODEL_TO_ENCODING[model_name]
    for prefix, encoding_name in MODEL_PREFIX_TO_ENCODING.items():
        if model_name.startswith(prefix):
            return encoding_name
    raise KeyError(
        f"Could not automatically map {model_name} to a tokeniser. "
        "Please use `tokenizer.get_encoding` to explicitly get the tokeniser you expect."
    )


def encoding_for_model(model_name: str) -> Encoding:
    """The encoding ``model_name`` uses (loaded once and shared, as :func:`tokenizer.get_encoding`).

    >>> encoding_for_model("gpt2").encode("hello world")
    [31373, 995]
    """
    return get_encoding(encoding_name_for_model(model_name))
