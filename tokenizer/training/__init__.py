"""Training a byte-level BPE tokenizer from text (CS336 assignment 1 semantics): counts, then merges.

- ``train``: :func:`train_bpe`, the driver: reads the inputs, counts pre-tokens (in worker processes for big
  inputs), learns the merges, checkpoints and saves. It holds the reference merge loop
  (``learn_merges_reference``), a screenful of pure Python, beside the fast one;
- ``array_counts``: pre-token counts of many texts at once with array operations;
- ``train_kernel``, ``merge_state``: the fast merge loop compiled by numba, and the layout it shares with its
  driver;
- ``compiled_merges``: that loop loaded into this process, and run on one job's arrays;
- ``merge_loop_cache``, ``compile_merge_loop``, ``compiled_loop_loader``: where numba keeps its machine code, the
  process that compiles it there once per machine, and how a large job gets it without waiting.

Every fast loop is tested to learn exactly the reference loop's merges. What is not here: encoding with the
result (:mod:`tokenizer.encoding`), and reading input files (:mod:`tokenizer.jobs`).
"""
