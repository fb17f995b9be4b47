"""GPT-2 in NumPy, picoGPT-style: the model side of gpt2-numpy.

Data flows one way: text -> ``tokenizer`` -> ids -> this package -> ids -> ``tokenizer`` -> text. So this
package imports ``tokenizer`` (for GPT-2's vocabulary and downloads), and ``tokenizer`` never imports it.
One file per idea, in the order a run uses them:

- ``models_dir.py``: where checkpoints live (``$GPT2_MODELS_DIR``, a checkout's ``models/``, the user cache);
- ``checkpoints.py``: a model by size or folder: OpenAI's files downloaded and read as picoGPT's params tree
  (``load_encoder_hparams_and_params``), written as a Hugging Face folder (``save_hf``);
- ``tfcheckpoint.py`` and ``crc32c.py``: TensorFlow's checkpoint format read (CRCs checked) and written with NumPy;
- ``hfmodel.py``: Hugging Face GPT-2 folders (safetensors) read and written by hand;
- ``encoder.py``: OpenAI's ``encoder.py`` (``get_encoder``, ``Encoder`` and its ``bpe()`` loop, running);
- ``model.py``: the forward pass, one function per idea (``gelu`` ... ``attention``, ``mha``, ``gpt2``), and
  picoGPT's full-recompute loop (``generate_reference``);
- ``kvcache.py``: the fast path: model.py's same functions with a key/value cache around them, batches of
  prompts, sampling (``generate``, ``generate_batch``);
- ``speculative.py``: more than one token per pass, the same output: drafts from a smaller GPT-2
  (``DraftModel``) or from the text itself (``PromptLookup``), verified several at a time (``generate``);
- ``scoring.py``: a text's negative log-likelihood, perplexity's ingredient (``token_nlls``, ``score``);
- ``next_tokens.py``: the next-token ranking the tokenizer playground is handed (``NextTokens``);
- ``cli.py``: the ``gpt2`` command (also ``python -m gpt2_numpy``).

What it does not hold: the tokenizer (``tokenizer/``), or picoGPT's three files. A checkout keeps
``gpt2.py``, ``encoder.py`` and ``utils.py`` at its root as thin faces over this package, so picoGPT's
code and its readers find the names they expect; they are not installed.

Importing the package imports nothing else; import the module you need (``from gpt2_numpy.model import
gpt2``).
"""
