"""docs/deployment.md's figures that come from stored files: the hybrid's deployment table (the
`score=expected` rows at 1 GiB: docs/results/hybrid_frozen_seeds.json's seed-0 bundles and their
in-sample deployments), its text, the count bundle's 1 GiB GC writes
(hybrid_frozen_counts_seeds.json) and the exit-code table (dogi_ml/zns/exit_codes.py). Each is
compared with its entry, rounded as the page prints it. The harness column says its counts equal
the simulator's: it is compared with the simulator's stored run.

Not checked here (no stored file holds them): the export figures (ns/block, the ycsb_a MLP's
accuracies and DOGI's int8/float WAFs), the firmware table and sizes (export runs not kept), the
groups K, the class/group agreement shares, the `score=argmax` rows and the tests' 16 MiB trace rows
(the latter's argmax WAFs and GC writes are tests/test_hybrid_frozen.py's goldens), the bundle's
`.rodata` sizes, the harness's run times, and the throughput tables (machine timings)."""

from __future__ import annotations

import json

from helpers import REPO, DocsCells, docs_table, docs_text

PAGE = "docs/deployment.md"  # the tests read the page through this name (a scratch copy can be put in its place)


def results(name: str) -> dict:
    return json.loads((REPO / "docs/results" / f"{name}.json").read_text())


def table(head: str) -> list[list[str]]:
    return docs_table(PAGE, head)


def text() -> str:
    return docs_text(PAGE)


HYBRID = "| workload | hybrid (float, online) | groups K | int8 = float class | bundle = float group | hybrid_frozen (simulator) | harness |"  # fmt: skip


def test_hybrid_deployment_table_is_hybrid_frozen_seeds_json():
    """The 1 GiB `score=expected` rows: the bundle's online run, the frozen scheme in sample, and
    the harness's WAF and GC writes (equal to the simulator's)."""
    data = results("hybrid_frozen_seeds")["workloads"]
    rows = {r[0]: r[1:] for r in table(HYBRID)}
    c = DocsCells(PAGE)
    for w in ("zipf", "ycsb_a"):
        row = rows[f"{w}, `score=expected`"]
        run, frozen = data[w]["bundles"]["hybrid_frozen"], data[w]["deployed"]["hybrid_frozen"]["in_sample"]
        assert frozen["user_writes"] == 16 * 262144  # 1 GiB, 16 capacities written
        c.eq(f"{w} hybrid (float, online)", row[0], f"{run['run_waf']:.4f}")
        c.eq(f"{w} hybrid_frozen (simulator)", row[4], f"{frozen['waf']:.4f}")
        c.eq(f"{w} harness", row[5], f"{frozen['waf']:.4f} ({frozen['gc_writes']} GC writes, equal)")
    c.done(2 * 3)


def test_hybrid_deployment_text_is_the_results_files():
    """The text under the table (the online run, the frozen bundle, the retrainings, the
    out-of-sample bound) and the count bundle's 1 GiB GC writes."""
    data = results("hybrid_frozen_seeds")["workloads"]
    counts = results("hybrid_frozen_counts_seeds")["workloads"]
    z, y = data["zipf"], data["ycsb_a"]
    frozen = {w: data[w]["deployed"]["hybrid_frozen"] for w in data}
    out_in = [abs(f["out_of_sample"]["gc_writes"] / f["in_sample"]["gc_writes"] - 1) for f in frozen.values()]
    assert round(100 * max(out_in), 1) <= 0.5, out_in  # "stays within 0.5% of its in-sample GC writes"
    assert z["bundles"]["hybrid_frozen"]["retrains"] == y["bundles"]["hybrid_frozen"]["retrains"]
    expected = [
        f"(3.1356 against {z['bundles']['hybrid_frozen']['run_waf']:.4f})",
        f"and reaches {z['deployed']['hybrid_frozen']['in_sample']['waf']:.4f} (ycsb_a: "
        f"{y['deployed']['hybrid_frozen']['in_sample']['waf']:.4f} against {y['bundles']['hybrid_frozen']['run_waf']:.4f})",
        f"under {z['bundles']['hybrid_frozen']['retrains']} successive models",
        f"zipf with {counts['zipf']['deployed']['hybrid_frozen']['in_sample']['gc_writes']:,} GC writes",
        f"varmail with {counts['varmail']['deployed']['hybrid_frozen']['in_sample']['gc_writes']:,} (",
    ]
    page = text()
    missing = [e for e in expected if e not in page]
    assert not missing, missing


def test_exit_code_table_is_exit_codes_py():
    """The statuses of the exit-code table are dogi_ml/zns/exit_codes.py's, in order."""
    from dogi_ml.zns import exit_codes

    codes = sorted(v for k, v in vars(exit_codes).items() if k.isupper() and isinstance(v, int))
    rows = table("| status | meaning |")
    c = DocsCells(PAGE)
    assert len(rows) == len(codes), rows
    for row, code in zip(rows, codes):
        c.eq(f"exit code {code}", row[0], str(code))
    c.done(len(codes))
