"""Data jobs: whole files and datasets through a tokenizer, in parallel, locally or on a Ray cluster.

- ``inputs``: the inputs of every file command (files, folders, globs, ``-`` for standard input; ``.txt``,
  ``.jsonl``, ``.jsonl.gz``, ``.parquet``) and the documents inside each, with one wording for bad input;
- ``workers``, ``engines``: where tasks run: worker processes on this machine, or Ray; every parallel job;
- ``dataset``: one input to a nanoGPT ``.bin`` of token ids (``encode-file``, and each shard of
  ``encode-dataset``), and measuring tokenizers on inputs;
- ``sharded``, ``manifest``: many shards to ``.bin`` files, resumably, with a manifest that proves each output
  whole;
- ``id_files``: a ``.bin`` of ids read a window at a time (``parity --ids``, ``decode --ids``);
- ``parity``: this tokenizer's ids against another's on files, with where and why they differ.

What is not here: how text becomes ids (the modules above this folder), or training (:mod:`tokenizer.training`).
"""
