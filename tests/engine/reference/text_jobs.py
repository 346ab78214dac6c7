"""Run OmniVoice 0.2.1's chunk_text_punctuation / add_punctuation on cases (reference env only).

Usage: python text_jobs.py CASES.json
Each case is {"fn": "chunk", "text", "chunk_len", "min_chunk_len"} or {"fn": "punct", "text"};
prints {"results": [...]} as one JSON object.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from upstream_modules import load

text = load("text")


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    results = []
    for case in cases:
        if case["fn"] == "chunk":
            results.append(text.chunk_text_punctuation(case["text"], case["chunk_len"],
                                                       case.get("min_chunk_len")))
        elif case["fn"] == "punct":
            results.append(text.add_punctuation(case["text"]))
        else:
            raise SystemExit(f"unknown case fn {case['fn']!r}")
    constants = {
        "SPLIT_PUNCTUATION": sorted(text.SPLIT_PUNCTUATION),
        "CLOSING_MARKS": sorted(text.CLOSING_MARKS),
        "END_PUNCTUATION": sorted(text.END_PUNCTUATION),
        "ABBREVIATIONS": sorted(text.ABBREVIATIONS),
    }
    print(json.dumps({"results": results, "constants": constants}, ensure_ascii=False))


if __name__ == "__main__":
    main()
