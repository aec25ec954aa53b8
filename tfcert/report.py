"""Rendering of verification results: a human summary, one JSON document,
or a JUnit XML file — the forms CI pipelines read."""
from __future__ import annotations

import json
from collections import Counter, OrderedDict
from xml.etree import ElementTree as ET

import mpmath

from tfcert.verify.check import Report, Result
from tfcert.verify.numbers import show


def _name(r: Result) -> str:
    return f"{r.phase}/{r.kind}" + ("" if r.block is None else f"/block {r.block}")


def human(report: Report) -> str:
    """One line per phase and claim kind, then every failure in full."""
    rows: OrderedDict[tuple[str, str], list[Result]] = OrderedDict()
    for r in report.results:
        rows.setdefault((r.phase, r.kind), []).append(r)
    lines = [f"{'phase':<14} {'claim':<18} {'checked':>7} {'failed':>6}"]
    for (phase, kind), results in rows.items():
        failed = sum(not r.ok for r in results)
        lines.append(f"{phase:<14} {kind:<18} {len(results):>7} {failed:>6}")
    for r in report.results:
        for failure in r.failures:
            lines.append(f"FAIL {_name(r)} ({r.where}): {failure}")
    failed = sum(not r.ok for r in report.results)
    verdict = "all claims hold" if report.ok else f"{failed} claim(s) FAIL"
    lines.append(f"{len(report.results)} claims checked: {verdict}")
    return "\n".join(lines)


def json_text(doc: object) -> str:
    """Every ``--json`` output is written this one way."""
    return json.dumps(doc, indent=2, ensure_ascii=False)


def as_json(report: Report) -> dict:
    return {"ok": report.ok, "claims": len(report.results),
            "failed": sum(not r.ok for r in report.results),
            "results": [{"phase": r.phase, "kind": r.kind, "block": r.block, "where": r.where,
                         "ok": r.ok, "failures": list(r.failures)} for r in report.results]}


def junit(report: Report) -> bytes:
    return ET.tostring(junit_suite(report), encoding="utf-8", xml_declaration=True)


def junit_suites(reports: list[tuple[str, Report]]) -> bytes:
    """Several bundles' reports: one ``testsuite`` each under ``testsuites``."""
    root = ET.Element("testsuites", tests=str(sum(len(r.results) for _, r in reports)),
                      failures=str(sum(not x.ok for _, r in reports for x in r.results)), errors="0")
    for name, report in reports:
        root.append(junit_suite(report, name))
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def junit_suite(report: Report, name: str = "tfcert.verify") -> ET.Element:
    """One testcase per claim, its ``time`` the seconds spent checking it."""
    failed = sum(not r.ok for r in report.results)
    seconds = sum(r.seconds for r in report.results)
    suite = ET.Element("testsuite", name=name, tests=str(len(report.results)),
                       failures=str(failed), errors="0", time=f"{seconds:.6f}")
    # several hats can share a block (--width > 4): CI tools merge testcases
    # with equal names, so a repeated name gets the claim's JSON path
    counts = Counter(_name(r) for r in report.results)
    for r in report.results:
        name = _name(r) if counts[_name(r)] == 1 else f"{_name(r)} ({r.where.rsplit(': ', 1)[-1]})"
        case = ET.SubElement(suite, "testcase", classname=f"tfcert.{r.phase}", name=name, time=f"{r.seconds:.6f}")
        if r.failures:
            failure = ET.SubElement(case, "failure", message=r.failures[0])
            failure.text = "\n".join([r.where, *r.failures])
    return suite


def phase_table(construction) -> str:
    """The construction's phases: block range and number of claims."""
    lines = [f"{'phase':<14} {'blocks':>12} {'claims':>7}"]
    for p in construction.phases:
        lines.append(f"{p.name:<14} {f'[{p.span[0]}, {p.span[1]})':>12} {len(p.claims):>7}")
    return "\n".join(lines)


def size_line(size: dict) -> str:
    """Blocks, width and parameters against the theorem's bounds."""
    b = size["bounds"]

    def item(key: str) -> str:
        return f"{key} {size[key]} {'≤' if size[key] <= b[key] else '>'} {b[key]}"

    ratio = size["parameters"] / size["d_sum_m"]
    return (f"size (Theorem {size['theorem']}): {item('blocks')}, {item('width')}, {item('parameters')} "
            f"({ratio:.2f}·dΣm)")


def _opt(x) -> str | None:
    return None if x is None else str(x)


def approx(x, root: bool = False, digits: int = 6) -> str:
    """A short decimal of an exact rational (its square root with ``root``),
    whatever its size: floats overflow past 1e308."""
    value = mpmath.mpf(int(x.p)) / int(x.q)
    return mpmath.nstr(mpmath.sqrt(value) if root else value, digits)


def rational(x) -> str:
    """An exact value for people: in full when short, else cut by ``show`` with
    its decimal beside it (the JSON output keeps every digit)."""
    text = str(x)
    return text if len(text) <= 12 else f"{show(x)} (≈ {approx(x)})"


def _hausdorff(squared) -> float | str | None:
    """The Hausdorff distance as a JSON number, or its decimal text past float range."""
    if squared is None:
        return None
    text = approx(squared, root=True, digits=17)
    return float(text) if abs(float(text)) != float("inf") else text


def audit_json(report) -> dict:
    """The audit as one JSON document (exact values as strings)."""
    out = {"interpolates": report.interpolates,
           "sequences": [{"sequence": s.index, "verdict": s.verdict, "exact": s.exact,
                          "hausdorff_squared": _opt(s.hausdorff_squared),
                          "hausdorff": _hausdorff(s.hausdorff_squared),
                          "enclosure_width": str(s.width)} for s in report.sequences],
           "attention_layers": [{"block": l.block, "min_gap": _opt(l.min_gap), "ties": [list(t) for t in l.ties]}
                                for l in report.layers],
           "uniform_attention_blocks": list(report.uniform_blocks), "size": report.size}
    if report.temperature is not None:
        out["temperature"] = str(report.temperature)
        out["largest_certified_temperature"] = _opt(report.largest_certified_temperature)
    if report.floats:
        out["float"] = [{"format": f.format, "bound": _opt(f.bound),
                         "bound_float": None if f.bound is None else float(f.bound), "failure": f.failure}
                        for f in report.floats]
    return out


def audit_stopped_json(reason: ArithmeticError) -> dict:
    """``tfcert audit --json`` when the replay stopped (a limit, an enclosure out of
    range): no verdicts, only why (the schema's second form)."""
    return {"interpolates": False, "not_checked": str(reason)}


def audit_human(report) -> str:
    softmax = report.temperature is not None
    lines = [f"temperature {show(report.temperature)} (≈ {approx(report.temperature)})"] if softmax else []
    lines.append(f"{'sequence':>8} {'verdict':>14} {'hausdorff':>12}" + (f" {'enclosure width':>16}" if softmax else ""))
    for s in report.sequences:
        h = "-" if s.hausdorff_squared is None else approx(s.hausdorff_squared, root=True)
        lines.append(f"{s.index:>8} {s.verdict:>14} {h:>12}" + (f" {approx(s.width, digits=3):>16}" if softmax else ""))
    for l in report.layers:
        ties = f", {len(l.ties)} tie(s): " + " ".join(f"[{a},{b}]" for a, b in l.ties) if l.ties else ""
        lines.append(f"attention block {l.block}: least argmax gap {rational(l.min_gap)}{ties}")
    lines.append(size_line(report.size))
    for f in report.floats:
        lines.append(f"float {f.format}: " + (f"every output within {approx(f.bound, digits=3)} of the exact one "
                                               f"(bound {rational(f.bound)})" if f.bound is not None else f"no bound: {f.failure}"))
    if softmax:
        largest = report.largest_certified_temperature
        lines.append("largest certified temperature: " +
                     ("none" if largest is None else f"{show(largest)} (≈ {approx(largest)})"))
    lines.append("verdict: interpolates exactly" if report.interpolates else
                 "verdict: NOT certified to interpolate at this temperature" if softmax else
                 "verdict: does NOT interpolate")
    return "\n".join(lines)
