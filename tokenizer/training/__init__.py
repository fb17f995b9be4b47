"""Training a byte-level BPE tokenizer from text (CS336 assignment 1 semantics): count pre-tokens, then merge.

Read in this order:

- ``reference``: the algorithm, on one screen: :func:`~tokenizer.training.reference.learn_merges_reference`
  counts every pair, merges the most frequent (ties: the lexicographically greater pair), and repeats;
- ``train``: :func:`~tokenizer.training.train.train_bpe`, the driver: reads the inputs, counts, merges,
  checkpoints, and returns ``(vocab, merges)``;
- ``counting``, ``chunks``: phase 1, pre-token counts of many files in worker processes, each file cut into
  chunks that can be counted apart; ``array_counts``: the counts of many texts at once by array operations;
- ``fast_merges``: phase 2, the reference's merges learned incrementally (a NumPy loop, or the compiled one
  for a large job); ``merge_tables``: the flat arrays and the pair table that loop works on;
- ``checkpoint``: the state kept in a folder so that a stopped run can resume;
- ``train_kernel``, ``merge_state``: the merge loop compiled by numba, and the layout it shares with its driver;
  ``compiled_merges``: that loop loaded into this process, and run on one job's arrays;
  ``merge_loop_cache``, ``compile_merge_loop``, ``compiled_loop_loader``: where numba keeps its machine code, the
  process that compiles it there once per machine, and how a large job gets it without waiting.

Every fast loop is tested to learn exactly the reference's merges. What is not here: encoding with the result
(:mod:`tokenizer.encoding`), and reading input files (:mod:`tokenizer.jobs`).

``from tokenizer.training import train_bpe`` gives the driver, imported on first use: importing it here at once
would bring NumPy and the input readers (about 0.15 s) into every process that imports a light module of this
package, such as ``reference`` or the compiling process of ``compile_merge_loop``. This is the one place that
rule is kept: ``tokenizer.train_bpe`` is this package's ``train_bpe``, asked here.
"""

__all__ = ["train_bpe"]


def __getattr__(name: str):
    # The driver on first use (see above); any other missing name is a submodule not imported yet, or a mistake.
    if name == "train_bpe":
        from .train import train_bpe

        globals()["train_bpe"] = train_bpe  # asked once
        return train_bpe
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
