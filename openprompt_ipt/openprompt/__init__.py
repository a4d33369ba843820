"""The OpenPrompt front door: our templates and heads as OpenPrompt classes (``templates/``, ``verbalizers/``),
registered by name when OpenPrompt is first imported (``hook.py``, ``registry.py``), with the transformers
shims OpenPrompt needs (``compat.py``) and its own command line (``cli.py``). Kept import-free: importing
``openprompt_ipt`` installs the hook from here and must stay fast."""
