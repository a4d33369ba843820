"""IDPG §4.5.5 / A.6: STS-B dev pairs ranked by the cosine of their sentences' [CLS] states, counted by
gold-score group in the top-k, without prompts (the frozen backbone) and with a trained run's prompts:

    python experiments/sts_cosine.py --run runs/stsb_m_idpg_phm/seed42 --top-k 100 200 300 \
        --out docs/sts_cosine/stsb_m_idpg_phm

writes <out>.md and <out>.png (existing ones only with --overwrite; openprompt_ipt/analysis/sts_cosine.py).
The run may be any trained run whose task reads STS-B-style pairs (its config's dataset names the data);
--max-pairs samples dev.
"""
from __future__ import annotations

import argparse
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import openprompt_ipt  # noqa: E402,F401  (compat shims before openprompt)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", required=True, help="a finished run directory (config.json + best.safetensors)")
    p.add_argument("--top-k", type=int, nargs="+", default=[100, 200, 300])
    p.add_argument("--max-pairs", type=int, default=None, help="a seeded sample of dev pairs (default: all)")
    p.add_argument("--data-root", default=None)
    p.add_argument("--out", required=True, help="output stem: writes <out>.md and <out>.png (existing ones need "
                   "--overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace <out>.md / <out>.png if they exist")
    args = p.parse_args(argv)
    try:
        from openprompt_ipt.analysis.sts_cosine import (figure, markdown, pair_cosines, plain_encoder,
                                                        prompted_encoder, top_k_group_counts)
        from openprompt_ipt.runner.experiment import paper_method_name
        from openprompt_ipt.data.prepare import data_source
        from openprompt_ipt.runner.plm import load_backbone
        from openprompt_ipt.runner.plotting import check_stem, write_table_and_plot
        from openprompt_ipt.commands.prog import sibling
        from openprompt_ipt.runner.predict import load_run

        check_stem(args.out, overwrite=args.overwrite)  # before the run and both encoders: seconds, not minutes
        if args.max_pairs is not None and args.max_pairs < 1:
            raise ValueError(f"--max-pairs {args.max_pairs} must be at least 1 (leave it out for every dev pair)")
        predictor = load_run(args.run, run_command=sibling(argv, p.prog, "sts_cosine", "run"))  # experiments/run.py
        task = predictor.task
        if not task.regression or task.score_range != (0.0, 5.0):
            raise ValueError(f"--run trained on {task.name}: the analysis reads STS-B pairs and their 0-5 scores "
                             "(a run on stsb)")
        dev = task.load(data_source(predictor.cfg, args.data_root).path, "validation")
        if args.max_pairs and args.max_pairs < len(dev):
            dev = random.Random(0).sample(dev, args.max_pairs)
        pairs = [(ex.text_a, ex.text_b) for ex in dev]
        gold = [task.unscale(ex.label) for ex in dev]
        backbone, tokenizer, _ = load_backbone(predictor.cfg["plm"]["model_path"])
        backbone.eval()
        counts = {"no prompt (frozen backbone)": top_k_group_counts(pair_cosines(plain_encoder(backbone, tokenizer), pairs), gold, args.top_k),
                  f"with prompts ({paper_method_name(predictor.cfg)}, trained run)": top_k_group_counts(pair_cosines(prompted_encoder(predictor), pairs), gold, args.top_k)}
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        write_table_and_plot(args.out, markdown(counts, len(pairs)), figure(counts), args.overwrite)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
