"""The version of gpt2-numpy, the one distribution that installs both packages (``tokenizer`` and ``gpt2_numpy``).

Written here once: pyproject.toml reads it (``[tool.setuptools.dynamic]``, without importing the package), and
both commands' ``--version`` print it, so the installed metadata and the commands agree, and a checkout run
without installing says its own version rather than that of whatever copy is installed.
"""

VERSION = "0.1.0"
