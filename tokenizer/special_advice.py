"""What to change when :meth:`Encoding.encode` refuses a special token, said in the words the user typed.

``encode`` takes two options for special tokens, ``allowed_special`` and ``disallowed_special``, and so does every
command (``--allowed_special``, ``--disallowed_special``). When text spells a refused special token, the advice
depends on which options named it, not on how they are written: this module holds that meaning once, as a
:class:`SpecialTokenRefusal`, and a :class:`SpecialSpelling` says how one kind of user writes the options.

``encode`` raises the ``ValueError`` tiktoken raises, its message the advice in Python's keyword arguments
(:data:`PYTHON_SPELLING`), and keeps the refusal on it; the command line finds it there (:func:`refusal_of`)
and asks for its flags' wording.

>>> from tokenizer import get_encoding
>>> try:
...     get_encoding("gpt2").encode("a <|endoftext|>")
... except ValueError as e:
...     error = e
>>> print(error)  # tiktoken's default: disallowed_special="all", nothing allowed
The text contains the special token '<|endoftext|>', which is disallowed. To encode it as the special token, \
pass allowed_special={'<|endoftext|>'} (or "all"); to encode it as plain text, pass disallowed_special=() \
(or enc.special_tokens_set - {'<|endoftext|>'} to keep checking the others).
>>> refusal_of(error)
SpecialTokenRefusal(token='<|endoftext|>', allowed=False, named=False, place='', special=True, encoding='gpt2')
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import NamedTuple


class SpecialSpelling(NamedTuple):
    """How a user writes ``encode``'s two special-token options: each field is a phrase of the advice, in
    which ``{token}`` stands for the refused token as Python writes it (``'<|endoftext|>'``)."""

    allowed: str  # the option whose tokens become their ids
    disallowed: str  # the option whose tokens are refused
    allow_it: str  # the first set so that the token becomes its id
    allow_none: str  # the first set so that no token becomes its id
    refuse_none: str  # the second set so that no token is refused
    refuse_all_but_it: str  # the second set so that every other token is still refused; "" if it cannot be said


PYTHON_SPELLING = SpecialSpelling(
    allowed="allowed_special",
    disallowed="disallowed_special",
    allow_it='allowed_special={{{token}}} (or "all")',
    allow_none="allowed_special=set()",
    refuse_none="disallowed_special=()",
    refuse_all_but_it="enc.special_tokens_set - {{{token}}}",
)


class SpecialTokenRefusal(NamedTuple):
    """The text holds ``token``, a special token that ``encode``'s options refuse.

    ``allowed``: ``allowed_special`` allows the token; ``named``: ``disallowed_special`` names it (a collection)
    rather than being ``"all"``, every special token ``allowed_special`` leaves out (tiktoken's default, where
    either option alone changes the outcome). ``place`` (``"data.txt: "``) goes before the message: where the
    text came from. ``special``: the token is one of the special tokens of the encoding (named ``encoding``,
    when known); ``disallowed_special`` may name other text, which tiktoken refuses too, but no option makes it a
    token.
    """

    token: str
    allowed: bool = False
    named: bool = False
    place: str = ""
    special: bool = True
    encoding: str = ""

    def error(self) -> ValueError:
        """The ``ValueError`` to raise (tiktoken's type: ``except ValueError`` catches it, a traceback names it),
        its message the advice in Python, with this refusal kept on it for :func:`refusal_of`."""
        error = ValueError(self.advice(PYTHON_SPELLING))
        error.refusal = self  # an attribute, so it is pickled with the error (from a worker process)
        return error

    def at(self, place: str) -> SpecialTokenRefusal:
        """The same refusal, said to be at ``place`` (a file's name: where the caller read the text)."""
        return self._replace(place=f"{place}: {self.place}")

    def advice(self, spelling: SpecialSpelling) -> str:
        """The message, with the options written as ``spelling`` writes them."""
        token = repr(self.token)
        allow_it = spelling.allow_it.format(token=token)
        if not self.special:
            return (f"{self.place}The text contains {token}, which is disallowed: {spelling.disallowed} names it, "
                    f"though it is no special token of {self.encoding or 'this encoding'}. To encode it as plain "
                    f"text, the one way it can be encoded, pass {spelling.refuse_none} (or leave {token} out of it).")
        said = f"{self.place}The text contains the special token {token}, which is disallowed. "
        if not self.named:
            others = spelling.refuse_all_but_it.format(token=token)
            others = f" (or {others} to keep checking the others)" if others else ""
            return (f"{said}To encode it as the special token, pass {allow_it}; to encode it as plain text, pass "
                    f"{spelling.refuse_none}{others}.")
        if self.allowed:
            return (f"{said}{spelling.allowed} allows it, but {spelling.disallowed} names it, which refuses it: to "
                    f"encode it as the special token, pass {spelling.refuse_none} (or leave {token} out of it); to "
                    f"encode it as plain text, leave it out of {spelling.allowed} as well ({spelling.allow_none}).")
        return (f"{said}{spelling.disallowed} names it, which refuses it whatever {spelling.allowed} says: to encode "
                f"it as plain text, pass {spelling.refuse_none} (or leave {token} out of it); to encode it as the "
                f"special token, leave it out of {spelling.disallowed} and pass {allow_it} as well.")


def refusal_of(error: BaseException) -> SpecialTokenRefusal | None:
    """The refusal ``error`` says, or None: an error :meth:`SpecialTokenRefusal.error` made, or one raised in its
    place (``raise ValueError(f"{where}: {e}") from None`` keeps it as the context) whose message ends with it.
    A refusal from the second is said to be at what the message puts before it."""
    refusal = getattr(error, "refusal", None)
    if isinstance(refusal, SpecialTokenRefusal):
        return refusal
    refusal = getattr(error.__context__, "refusal", None)
    if not isinstance(refusal, SpecialTokenRefusal):
        return None
    message, said = str(error), refusal.advice(PYTHON_SPELLING)
    if not message.endswith(said):
        return None
    return refusal._replace(place=message[: -len(said)] + refusal.place)


def rule_for(special_tokens: AbstractSet[str], allowed_special, disallowed_special) -> tuple[object, object]:
    """The ``allowed_special`` and ``disallowed_special`` that one encoding of several set side by side (its
    ``special_tokens``) is given, when one rule is set for them all: a token that only another of them has
    means nothing to this one, on either side. ``encode`` ignores such a name in ``allowed_special``, but
    refuses text that a ``disallowed_special`` collection names, special token or not: the rule "refuse
    '<|fim_prefix|>'" set for gpt2 and cl100k_base together is cl100k_base's, and gpt2 reads that text as the
    plain text it is to it. ``"all"`` stays ``"all"``: each encoding's own tokens.

    >>> rule_for({"<|endoftext|>"}, set(), {"<|endoftext|>", "<|fim_prefix|>"})
    (set(), {'<|endoftext|>'})
    """
    def own(tokens):
        return tokens if isinstance(tokens, str) or tokens is None else set(tokens) & special_tokens
    return own(allowed_special), own(disallowed_special)


def placed(error: ValueError, place: str) -> ValueError:
    """``error``, said to be at ``place``: ``ValueError(f"{place}: {error}")``, a refusal's kept on it."""
    refusal = refusal_of(error)
    if refusal is not None:
        return refusal.at(place).error()
    return ValueError(f"{place}: {error}")
