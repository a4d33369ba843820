"""The experiment runner: engineering around the method (config, data protocols, one run end to end,
seeds and sweeps, tables and plots, prediction with a finished run).

The research code — what a prompt is and how it enters the PLM — lives in ``templates/``,
``generators/`` and ``injection/``; nothing there imports from here.
"""
