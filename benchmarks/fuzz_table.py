"""Render the rows ``make fuzz`` collected (JSON lines) as the README's Markdown table.

    python benchmarks/fuzz_table.py runs/fuzz/rows.jsonl

One row per interface: generated cases, node deaths, requests without a reply, replies with an
undocumented code, refused requests that changed memory (or a memory folder failing its check),
and how many requests the node refused with a documented code. A total row closes the table;
the exit status is 1 when any of the four failure columns is not zero.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COLUMNS = ("cases", "deaths", "no_reply", "wrong_codes", "invalid_writes", "refused")
FAILURES = ("deaths", "no_reply", "wrong_codes", "invalid_writes")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: fuzz_table.py ROWS.jsonl", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in Path(argv[0]).read_text().splitlines() if line.strip()]
    if not rows:
        print(f"no rows in {argv[0]}", file=sys.stderr)
        return 2
    print("| node | interface | kind | cases | node deaths | no reply | wrong codes | "
          "invalid writes | refused (documented code) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['node']} | `{r['interface']}` | {r['kind']} | "
              + " | ".join(str(r[c]) for c in COLUMNS) + " |")
    totals = {c: sum(int(r[c]) for r in rows) for c in COLUMNS}
    print(f"| **all** | {len(rows)} interfaces | | "
          + " | ".join(f"**{totals[c]}**" for c in COLUMNS) + " |")
    bad = [r for r in rows if any(r[c] for c in FAILURES)]
    for r in bad:
        print(f"\n{r['node']} {r['interface']}: {'; '.join(r['problems'])}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
