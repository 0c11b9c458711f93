"""The soak's report: figures per process, alerts, probe cycles, log findings, and each check
passed or failed."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from soak.alert_load import Ledger
from soak.fault_driver import FaultStats
from soak.log_scan import Finding
from soak.memory import MemoryVerdict
from soak.probe_cycles import CycleVerdict
from soak.processes import ROLES, Stopped
from soak.stored_alerts import AlertTally

SHOWN = 5  # examples shown of each kind of failure


@dataclass
class Outcome:
    seconds: float
    instances: int
    memory: list[MemoryVerdict]
    roles_missing: dict[str, int]  # Procfile entry -> samples in which it did not run
    ledger: Ledger
    faults: FaultStats
    alerts: AlertTally
    drain_s: float
    cycles: list[CycleVerdict]
    stopped: Stopped
    queued: list[
        tuple[int, float]
    ]  # tasks waiting in the broker, the oldest's age: at the load's end, after the drain
    findings: list[Finding]
    allowed: int
    lines: list[str] = field(default_factory=list)

    @property
    def checks(self) -> dict[str, bool]:
        return {
            "memory flat": len(self.memory) == len(ROLES) and all(v.ok for v in self.memory),
            "no lost alert": self.alerts.complete and not self.ledger.refused and self.ledger.accepted > 0,
            "no stuck probe cycle": bool(self.cycles) and all(v.ok for v in self.cycles),
            "no unhandled exception": not self.findings,
            "processes up, stopped cleanly": not any(self.roles_missing.values()) and self.stopped.clean,
        }

    @property
    def passed(self) -> bool:
        return all(self.checks.values())


def render(outcome: Outcome) -> str:
    out: list[str] = [f"== soak report: {outcome.instances} instances, {outcome.seconds:.0f} s of load"]
    out += _memory(outcome)
    out += _alerts(outcome)
    out += _faults(outcome.faults)
    out += _cycles(outcome.cycles)
    (at_end, oldest), (after, oldest_after) = outcome.queued
    out.append(
        f"  tasks waiting in the broker: {at_end} when the load stopped (the oldest sent {oldest:.0f} s "
        f"before), {after} after the drain (the oldest {oldest_after:.0f} s)"
    )
    out += _logs(outcome)
    out.append("== checks")
    out += [f"  {'PASS' if ok else 'FAIL'}  {name}" for name, ok in outcome.checks.items()]
    out.append(f"== soak {'passed' if outcome.passed else 'FAILED'}")
    return "\n".join(out)


def _memory(outcome: Outcome) -> list[str]:
    out = ["== memory (RSS of each Procfile process with its children; medians of the first and last third)"]
    heads = ("procs", 5), ("start MiB", 10), ("end MiB", 9), ("growth", 8), ("bound", 7), ("peak", 7)
    out.append(f"  {'process':8} " + " ".join(f"{h:>{w}}" for h, w in heads))
    for v in outcome.memory:
        out.append(
            f"  {v.role:8} {v.processes:>5} {v.first_mib:10.1f} {v.last_mib:9.1f} {v.growth_mib:+8.1f} "
            f"{v.bound_mib:7.1f} {v.peak_mib:7.1f}  {'ok' if v.ok else 'GREW'}"
        )
    out.append("  (the simulator's bound adds what its access logs hold once full: a ring, not a leak)")
    judged = {v.role for v in outcome.memory}
    out += [f"  {role:8} not enough samples after the warm-up" for role in ROLES if role not in judged]
    out += [f"  {role}: not running in {n} samples" for role, n in outcome.roles_missing.items() if n]
    return out


def _alerts(outcome: Outcome) -> list[str]:
    ledger, tally = outcome.ledger, outcome.alerts
    answers = sorted(ledger.answer_s)
    p50 = statistics.median(answers) * 1000 if answers else 0.0
    p99 = answers[min(len(answers) - 1, int(0.99 * len(answers)))] * 1000 if answers else 0.0
    out = [
        "== alerts",
        f"  payloads sent {ledger.payloads} ({ledger.payloads / max(outcome.seconds, 1):.1f}/s), accepted "
        f"{ledger.accepted}, refused {len(ledger.refused)}; retried after 503: {ledger.retried_503}, "
        f"after a connection error: {ledger.retried_errors}",
        f"  answer p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {max(answers, default=0) * 1000:.0f} ms",
        f"  alerts accepted {ledger.alerts_accepted} ({tally.sent} fingerprints); stored as last sent "
        f"{tally.stored - len(tally.wrong_status)} of {tally.sent} after a drain of {outcome.drain_s:.0f} s",
    ]
    out += [f"  refused: {reason}" for reason in ledger.refused[:SHOWN]]
    out += [f"  missing: {fp}" for fp in tally.missing[:SHOWN]]
    out += [f"  stored {got!r}, last sent {want!r}: {fp}" for fp, want, got in tally.wrong_status[:SHOWN]]
    return out


def _faults(stats: FaultStats) -> list[str]:
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(stats.injected.items()))
    out = [
        "== faults",
        f"  injected {sum(stats.injected.values())} ({kinds or 'none'}); cleared by the driver "
        f"{stats.cleared}; control port errors {len(stats.errors)}",
    ]
    return out + [f"  error: {e}" for e in stats.errors[:SHOWN]]


def _cycles(cycles: list[CycleVerdict]) -> list[str]:
    out = ["== probe cycles (since the load started)"]
    for v in cycles:
        newest = "never" if v.newest_age_s is None else f"{v.newest_age_s:.0f} s ago"
        out.append(
            f"  {v.kind:8} every {v.interval_s:>3} s: completed {v.completed:>3} (at least "
            f"{v.expected_at_least}; ~{v.mean_instances:.0f} instances each), skipped {v.skipped}, "
            f"abandoned {v.abandoned}, "
            f"open too long {v.open_too_long}; longest gap {v.max_gap_s:.0f} s (bound {v.gap_bound_s:.0f}); "
            f"newest {newest}  {'ok' if v.ok else 'STUCK'}"
        )
    return out


def _logs(outcome: Outcome) -> list[str]:
    by_process: dict[str, list[Finding]] = {}
    for finding in outcome.findings:
        by_process.setdefault(finding.process, []).append(finding)
    counts = ", ".join(f"{p} {len(f)}" for p, f in sorted(by_process.items())) or "none"
    out = [f"== log: exceptions and errors: {counts}; allowed (expected): {outcome.allowed}"]
    for process, findings in sorted(by_process.items()):
        for finding in findings[:SHOWN]:
            out.append(f"  {process} line {finding.line_no}: {finding.headline[:300]}")
    stop = outcome.stopped
    killed = f", SIGKILL sent to {', '.join(stop.killed)}" if stop.killed else ""
    how = "cleanly" if stop.clean else f"NOT cleanly (exit {stop.returncode}{killed})"
    out.append(f"== the console stopped {how} in {stop.seconds:.1f} s")
    return out
