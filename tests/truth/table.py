"""The BENCHMARKS.md table of the truth corpus: per scenario, the truth, our top finding, and
the peers' (from each scenario's truth.observed.json).

    SP_TRUTH_TABLE=/tmp/truth.jsonl cargo test -p system-profile-mcp --test integration truth::
    .venv/bin/python tests/truth/table.py /tmp/truth.jsonl
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def first(rows, key, n=1):
    out = []
    for r in rows[:n]:
        share = r.get("self_percent", r.get("cpu_percent", r.get("own_percent")))
        out.append(f"`{r['function']}` {share}%" if share is not None else f"`{r['function']}`")
    return ", ".join(out)


def truth_text(sc):
    t = sc["truth"]
    if t.get("summary"):
        return t["summary"]
    if t.get("main"):
        return " or ".join(
            f"{m['rule']}" + (f" `{m['subject']}`" if m.get("subject", "*") != "*" else "") for m in t["main"])
    if t.get("flat_below_percent"):
        return f"flat: nothing at {t['flat_below_percent']:.0f}%, nothing to change"
    return "no change in the user's code is true"


def main():
    ours = {}
    for line in Path(sys.argv[1]).read_text().splitlines():
        r = json.loads(line)
        ours[r["scenario"]] = r
    print("| scenario | truth | ours: top two recommendations | ours: top CPU hotspot | py-spy (default) top | Scalene top | judged |")
    print("|---|---|---|---|---|---|---|")
    for d in sorted((HERE / "scenarios").iterdir()):
        sc = json.loads((d / "scenario.json").read_text())
        obs = json.loads((d / "truth.observed.json").read_text())
        o = ours.get(d.name, {})
        scalene = obs.get("peer_scalene_top")
        scalene = first(scalene, "cpu_percent") if isinstance(scalene, list) and scalene else (scalene or "—")
        recs = "; ".join(f"{i + 1}. {t}" for i, t in enumerate(o.get("top_recommendations") or [])) or "none"
        print(f"| {d.name} | {truth_text(sc)} | {recs} | "
              f"{o.get('top_hotspot') or '—'} | {first(obs.get('peer_py_spy_top_self', []), 'self_percent')} | "
              f"{scalene} | {'pass' if o.get('passed') else 'FAIL' if o else 'not run'} |")


if __name__ == "__main__":
    main()
