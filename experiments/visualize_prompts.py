"""IPT Figure 4: project held-out sentences of the category corpus represented by (a) the PLM's
mean-pooled embeddings and (b) the pretrained prompt embeddings (PCA and t-SNE, coloured by
category) to a PNG, and print a silhouette score for each representation.

    python experiments/visualize_prompts.py --export exports/textcnn-minilm --out docs/img/prompt_space.png

An existing --out or --json file (another export's figure) is kept unless --overwrite.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def check_outputs(files, overwrite: bool = False) -> None:
    """Each output file (flag -> path or None) can be written: not a folder, no file among its folders, and
    not there already unless ``overwrite`` (a finished figure is kept unless the user says so)."""
    from openprompt_ipt.runner.plotting import check_new_file
    from openprompt_ipt.runner.run_dirs import check_output_folder

    for flag, path in files.items():
        if not path:
            continue
        if os.path.isdir(path):
            raise ValueError(f"{flag} '{path}' is a folder: give a file name in it, e.g. "
                             f"{os.path.join(path, 'prompt_space.png' if flag == '--out' else 'scores.json')}")
        check_output_folder(os.path.dirname(path), flag, path)
        if not overwrite:
            check_new_file([path], flag)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--export", required=True, help="a finished export folder of experiments/pretrain_categories.py")
    p.add_argument("--out", default=None, help="PNG path (default: <export>/prompt_space.png)")
    p.add_argument("--n", type=int, default=4000, help="sentences (held-out test split of the corpus; the paper used 4000)")
    p.add_argument("--prompt-length", type=int, default=16, help="L: first L tokens look up the prompt rows (as Pretrained IPT)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", default=None, help="also write the scores here")
    p.add_argument("--overwrite", action="store_true", help="replace --out / --json files that already exist")
    args = p.parse_args(argv)
    try:
        import torch
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging

        from openprompt_ipt.generators.vocab_table import tokenizer_fingerprint
        from openprompt_ipt.pretraining.pipeline import load_tokenizer
        from openprompt_ipt.pretraining.visualize import REPRESENTATIONS, figure_png, read_heldout, represent, silhouettes
        from openprompt_ipt.runner.plotting import write_new_files
        from safetensors import safe_open

        out = args.out or os.path.join(args.export, "prompt_space.png")
        check_outputs({"--out": out, "--json": args.json}, args.overwrite)  # before PCA and t-SNE: a line, not minutes
        if args.threads:
            torch.set_num_threads(args.threads)
        texts, labels = read_heldout(args.export, args.n, args.seed)
        if not 2 <= len(set(labels)) < len(texts):  # what a silhouette score needs
            raise ValueError(f"--n {args.n}: the sample holds {len(texts)} sentences of {len(set(labels))} categories; "
                             "the silhouette needs at least 2 categories and more sentences than categories: raise --n")
        with safe_open(os.path.join(args.export, "embedding.safetensors"), framework="pt") as f:
            table, meta = f.get_tensor("embedding"), f.metadata()
        tokenizer, path = load_tokenizer(meta["tokenizer"])
        if meta.get("tokenizer_fingerprint") and meta["tokenizer_fingerprint"] != tokenizer_fingerprint(tokenizer):
            raise ValueError(f"tokenizer '{meta['tokenizer']}' here has another vocabulary than the one export "
                             f"'{args.export}' was made with (fingerprint {tokenizer_fingerprint(tokenizer)} != "
                             f"{meta['tokenizer_fingerprint']}): its table rows are token ids of that vocabulary; "
                             "re-export it: python experiments/pretrain_categories.py ... --overwrite")
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        plm = AutoModel.from_pretrained(path)
        categories = [c for c in json.loads(meta["categories"]) if c in set(labels)]
        reps = represent(texts, tokenizer, plm, table, args.prompt_length)
        scores, proj = silhouettes(reps, labels, seed=args.seed)
        files = {out: figure_png(proj, labels, categories, scores)}
        if args.json:  # the scores land with their figure, or neither does
            files[args.json] = json.dumps({"n": len(texts), "prompt_length": args.prompt_length, "scores": scores},
                                          indent=2)
        write_new_files(files, {out: "--out", args.json: "--json"}, args.overwrite)
    except (KeyError, ValueError, FileNotFoundError, ImportError) as e:
        # KeyError's str() wraps the message in quotes: print the message itself (not a path's own quote)
        print(f"error: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
        return 2
    print(f"{len(texts)} held-out sentences, {len(categories)} categories, L={args.prompt_length}, backbone {meta['tokenizer']}")
    print(f"{'representation':<72} {'full-dim cosine':>15} {'PCA 2-D':>8} {'t-SNE 2-D':>9}")
    for name, s in scores.items():
        print(f"{REPRESENTATIONS[name]:<72} {s['full_cosine']:>15.3f} {s['pca_2d']:>8.3f} {s['tsne_2d']:>9.3f}")
    print(f"silhouette: higher = categories better separated. plot: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
