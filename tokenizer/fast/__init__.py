"""The fast core: the same ids as the readable core (:mod:`tokenizer.core`), found with caches and arrays.

What is here is only for speed; every function in it has an oracle at the package's top (the readable split,
``bpe.merge_reference``) and tests that hold the two equal. :class:`FastCore` is the one object the
``Encoding`` face talks to; the rest are its parts:

- ``core``: the fast core itself: a piece cache for short texts, batch BPE for the pieces a call lacks, the
  array path for long texts, and the thresholds that choose between them;
- ``stdlib_patterns``, ``unicode16``: OpenAI's patterns spelled for the standard library's faster ``re``;
- ``array_split``: where the patterns cut a text, found by NumPy array rules instead of a regex;
- ``piece_arrays``, ``batch_bpe``, ``array_encode``: many pieces looked up and merged at once in NumPy;
- ``uncrossable``: byte pairs no token holds, where a long piece can be cut into short, cacheable parts;
- ``table_cache``, ``vocab_cache``: the batch BPE tables and the parsed vocabulary files, kept on disk;
- ``bpe_kernel``, ``compiled_bpe``: ``bpe.merge`` compiled by numba (the ``train`` extra), and how a process that
  meets much new text loads it in the background.

What is not here: the rules themselves (pre-tokenization patterns, BPE, special tokens, decoding live in the
readable modules above this folder), training (:mod:`tokenizer.training`) and file jobs (:mod:`tokenizer.jobs`).
Importing this package imports none of its modules, and NumPy only when a module that needs it is loaded.
"""
