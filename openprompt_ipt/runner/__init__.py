"""The experiment runner: engineering around the method (config, one run end to end, seeds and sweeps,
tables and plots, prediction with a finished run). The data it trains on comes from one call,
``data.prepare.prepare_splits``.

The research code — what a prompt is and how it enters the PLM — lives in ``generators/``,
``injection/`` and ``prompting/``, and the doors in ``openprompt/`` and ``hf/``; nothing there imports from here.
"""
