"""Data jobs: whole files and datasets through a tokenizer, in parallel, locally or on a Ray cluster.

- ``shards``: the inputs of a job (files, folders, globs; ``.txt``, ``.jsonl``, ``.jsonl.gz``, ``.parquet``)
  and the documents inside each;
- ``workers``, ``engines``: where tasks run: worker processes on this machine, or Ray;
- ``dataset``: one text file to a nanoGPT ``.bin`` of token ids, and measuring tokenizers on files;
- ``sharded``, ``manifest``: many shards to ``.bin`` files, resumably, with a manifest that proves each output
  whole;
- ``parity``: this tokenizer's ids against another's on files, with where and why they differ.

What is not here: how text becomes ids (the modules above this folder), or training (:mod:`tokenizer.training`).
"""
