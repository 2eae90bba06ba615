"""A Markdown table of an `eval --json` report (docs/measurements.md's tables come from it).

trinity eval ... --json > report.json && python scripts/eval_table.py report.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    report = json.loads(Path(sys.argv[1]).read_text("utf-8"))
    print("| policy | pass@1 | 95% CI | $/task | mean turns |\n|---|---|---|---|---|")
    for row in report["rows"]:
        lo, hi = row["ci95"]
        print(
            f"| `{row['policy']}` | {row['pass_at_1']:.3f} | {lo:.2f}–{hi:.2f} "
            f"| {row['usd_per_task']:.5f} | {row['mean_turns']:.2f} |"
        )
    margins = ", ".join(
        f"{k} {v:+.2f}" for k, v in report["paired_margin_se"].items() if v is not None
    )
    print(
        f"\n{report['tasks']} tasks; best single: `{report['best_single']}`; "
        f"paired margins of the first head (SE): {margins}; "
        "relative error reduction vs the best single: "
        f"{report['rel_err_reduction_vs_best_single']:+.0%}"
    )
    for point in report.get("curve", []):
        print(
            f"- `{point['head']}` (cost weight {point['cost_weight']}): "
            f"{point['pass_at_1']:.3f} at ${point['usd_per_task']:.5f}/task"
        )


if __name__ == "__main__":
    main()
