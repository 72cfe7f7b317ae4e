"""Fail on any checkov finding not accepted (with a reason) in k8s/checkov-accepted.yaml.

    checkov ... -o json > findings.json; python k8s/checkov_gate.py findings.json

Prints each accepted finding with its reason, each unaccepted one (these fail), and any accepted
entry that matched nothing (a warning: drop it, so the list never outlives the code it excuses).
"""

from __future__ import annotations

import fnmatch
import json
import sys
from pathlib import Path

import yaml

ACCEPTED = Path(__file__).resolve().parent / "checkov-accepted.yaml"


def main(paths: list[str]) -> int:
    accepted = yaml.safe_load(ACCEPTED.read_text())
    used: set[tuple[str, str, str]] = set()
    bad = 0
    for path in paths:
        reports = json.loads(Path(path).read_text())
        for report in reports if isinstance(reports, list) else [reports]:
            framework = report["check_type"]
            rules = accepted.get(framework, [])
            summary = report["summary"]
            print(f"checkov {framework}: {summary['passed']} passed, {summary['failed']} failed")
            for finding in report["results"]["failed_checks"]:
                rule = next(
                    (
                        r
                        for r in rules
                        if r["id"] == finding["check_id"] and fnmatch.fnmatch(finding["resource"], r["resource"])
                    ),
                    None,
                )
                where = f"{finding['check_id']} {finding['resource']} ({finding['file_path']})"
                if rule is None:
                    bad += 1
                    print(f"  NOT ACCEPTED {where}: {finding['check_name']}")
                else:
                    used.add((framework, rule["id"], rule["resource"]))
                    print(f"  accepted {where}: {rule['reason']}")
    scanned = set()
    for path in paths:
        reports = json.loads(Path(path).read_text())
        scanned |= {r["check_type"] for r in (reports if isinstance(reports, list) else [reports])}
    for framework, rules in accepted.items():
        for r in rules:
            if framework in scanned and (framework, r["id"], r["resource"]) not in used:
                print(f"  warning: stale accepted entry {framework} {r['id']} {r['resource']}: matches no finding")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
