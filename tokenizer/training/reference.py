"""Training byte-level BPE, the whole algorithm in a screenful of plain Python: start here.

Training learns *merges*, an ordered list of pairs of tokens, from how often pre-tokens occur:

1. Count the pre-tokens. The text is cut at special tokens, then into pre-tokens by a regular expression (words
   with their leading space, numbers, punctuation, whitespace), and each distinct pre-token is counted. A pair
   is only ever counted inside one pre-token, so no merge joins the end of one word with the start of the next.
2. Start with every pre-token spelled as its UTF-8 bytes: 256 possible tokens, any text covered.
3. Count every adjacent pair of tokens, each pre-token weighted by how often it occurs.
4. Merge the most frequent pair: it becomes one new token wherever it occurs, left to right without overlap
   (``a a a`` with the pair ``(a, a)`` becomes ``aa a``).
5. Among pairs with the same count, the lexicographically greater pair wins, comparing ``(left, right)`` as
   tuples of byte strings. This is the tie rule of Stanford CS336's assignment 1; OpenAI never published
   GPT-2's training code nor how it broke ties.
6. Repeat from 3 until there are as many merges as asked for, or no pair is left.

:func:`learn_merges_reference` below is steps 2 to 6 on counts you give it (:func:`byte_words` is step 2,
:func:`count_pairs` step 3, :func:`merge_pair` step 4):

>>> counts = {"low": 5, "lower": 2, "widest": 3, "newest": 6}  # CS336's example, split at spaces
>>> learn_merges_reference(counts, 6)  # 1st: (s, t) and (e, s) tie at 9, and b"s" > b"e"
[(b's', b't'), (b'e', b'st'), (b'o', b'w'), (b'l', b'ow'), (b'w', b'est'), (b'n', b'e')]

What it does not do: count pre-tokens (:func:`tokenizer.training.counting.count_pretokens` does, over files, in
parallel), build the vocabulary or save anything (:func:`tokenizer.training.train.train_bpe` does), or run fast:
it recounts every pair for every merge. :func:`tokenizer.training.fast_merges.learn_merges` learns the same
merges incrementally, and tests check the two agree.
"""

from __future__ import annotations

from collections import Counter

Merges = list[tuple[bytes, bytes]]


def learn_merges_reference(counts: dict[str, int], num_merges: int) -> Merges:
    """Up to ``num_merges`` merges from pre-token counts, written plainly: count every pair, merge the most
    frequent one everywhere, repeat. ``fast_merges.learn_merges`` gives the same merges, faster; tests check it."""
    words = byte_words(counts)
    merges: Merges = []
    while len(merges) < num_merges:
        pairs = count_pairs(words)
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair))  # most frequent; a tie goes to the greater pair
        merges.append(best)
        words = merge_pair(words, best)
    return merges


def byte_words(counts: dict[str, int]) -> Counter:
    """Each pre-token as a tuple of one-byte tokens -> how often it occurs."""
    words: Counter = Counter()
    for pretoken, n in counts.items():
        data = pretoken.encode("utf-8") if isinstance(pretoken, str) else bytes(pretoken)
        words[tuple(bytes([b]) for b in data)] += n
    return words


def count_pairs(words: Counter) -> Counter:
    """Every adjacent pair of tokens -> how often it occurs (each word weighted by its count)."""
    pairs: Counter = Counter()
    for word, n in words.items():
        for pair in zip(word, word[1:]):
            pairs[pair] += n
    return pairs


def merge_pair(words: Counter, pair: tuple[bytes, bytes]) -> Counter:
    """The words with ``pair`` replaced by one token, left to right without overlap: (a, a, a) -> (aa, a)."""
    merged: Counter = Counter()
    for word, n in words.items():
        out, i = [], 0
        while i < len(word):
            if word[i : i + 2] == pair:
                out.append(pair[0] + pair[1])
                i += 2
            else:
                out.append(word[i])
                i += 1
        merged[tuple(out)] += n
    return merged
