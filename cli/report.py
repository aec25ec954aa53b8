"""Rendering of verification results: a human summary, one JSON document,
or a JUnit XML file — the forms CI pipelines read."""
from __future__ import annotations

import json
from collections import OrderedDict
from xml.etree import ElementTree as ET

from tfcert.verify.check import Report, Result


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


def as_json(report: Report) -> dict:
    return {"ok": report.ok, "claims": len(report.results),
            "failed": sum(not r.ok for r in report.results),
            "results": [{"phase": r.phase, "kind": r.kind, "block": r.block, "where": r.where,
                         "ok": r.ok, "failures": list(r.failures)} for r in report.results]}


def junit(report: Report) -> bytes:
    failed = sum(not r.ok for r in report.results)
    suite = ET.Element("testsuite", name="tfcert.verify", tests=str(len(report.results)),
                       failures=str(failed), errors="0")
    for r in report.results:
        case = ET.SubElement(suite, "testcase", classname=f"tfcert.{r.phase}", name=_name(r))
        if r.failures:
            failure = ET.SubElement(case, "failure", message=r.failures[0])
            failure.text = "\n".join([r.where, *r.failures])
    return ET.tostring(suite, encoding="utf-8", xml_declaration=True)


def dump_json(value: dict) -> str:
    return json.dumps(value, indent=1)
