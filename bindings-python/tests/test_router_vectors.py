"""The shared router scenarios of tests/vectors/router-scenarios.json, replayed through the
Python module as every door replays them (see the file's comment for the world they assume).

A call held in flight (``begin``/``end``) is a ``router.run`` on a thread of its own whose
function waits to be let go; a handoff (or a close) begun in the background likewise, and its
step returns once the router's ``draining`` event for the tenant came.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest

import gotry_tenant_state as gts

VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors"
DOC: Any = json.loads((VECTORS / "router-scenarios.json").read_text(encoding="utf-8"))
SCENARIOS: list[Any] = DOC["scenarios"]
assert SCENARIOS, "no router scenarios in the vectors"

Json = Any


def outcome(call: Callable[[], Json]) -> Json:
    try:
        return call()
    except gts.TenantStateError as error:
        return {"error": error.code}


class Background:
    """A blocking call on a thread of its own, and what it answered; ``done`` is set once the
    answer is there (a caller may pass an event it also sets for other reasons)."""

    def __init__(self, call: Callable[[], Json], done: threading.Event | None = None) -> None:
        self.answer: Json = None
        self.done = threading.Event() if done is None else done

        def body() -> None:
            try:
                self.answer = outcome(call)
            finally:
                self.done.set()

        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()

    def wait(self) -> Json:
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "a background call never ended"
        return self.answer


class HeldCall:
    """A call of ``router.run`` held in flight until ``end``."""

    def __init__(self, router: gts.TenantRouter, key: str, line: str) -> None:
        self.entered = threading.Event()
        # Set by whichever comes first: the call running, or its refusal answered.
        self.settled = threading.Event()
        self.release = threading.Event()

        def call(handle: gts.TenantHandle) -> None:
            append_line(handle, line)
            self.entered.set()
            self.settled.set()
            assert self.release.wait(timeout=60), "a held call was never let go"

        self.run = Background(lambda: router.run(key, call) or {"ok": True}, done=self.settled)

    def begun(self) -> Json:
        """``{"ok": true}`` once the call runs, or the refusal it met before it ran."""
        assert self.settled.wait(timeout=60), "a held call neither ran nor was refused"
        return {"ok": True} if self.entered.is_set() else self.run.answer

    def end(self) -> Json:
        self.release.set()
        return self.run.wait()


def append_line(handle: gts.TenantHandle, line: str) -> None:
    root = Path(handle.root)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "lines.txt", "a", encoding="utf-8") as file:
        file.write(line + "\n")


class Drains:
    """The ``draining`` events one router told, by key: a step that begins a drain in the
    background returns once its drain was told, so the next step may assume it has begun."""

    def __init__(self) -> None:
        self.told: dict[str, int] = {}
        self.changed = threading.Condition()

    def tell(self, event: gts.RouterEvent) -> None:
        """The router's ``on_event``."""
        if event.kind == "draining":
            with self.changed:
                self.told[event.key] = self.told.get(event.key, 0) + 1
                self.changed.notify_all()

    def count(self, key: str) -> int:
        with self.changed:
            return self.told.get(key, 0)

    def until_told(self, key: str, before: int) -> None:
        """Returns once a drain of ``key`` is told beyond the ``before`` told already. The
        bound keeps a replay that would hang from hanging; it is no time limit on the router."""
        with self.changed:
            told = self.changed.wait_for(lambda: self.told.get(key, 0) > before, timeout=30)
        assert told, f"no draining event told for {key} within 30 s"


def close_report(report: gts.CloseReport) -> Json:
    """A close report in the vectors' spelling; no tenant may fail in these scenarios."""
    assert report.failed == [], report.failed
    return {"handed_off": report.handed_off, "timed_out": report.timed_out}


class Site:
    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.org: str = DOC["organization"]
        self.clock = gts.ManualClock(DOC["start_ms"])
        self.leases = gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=self.clock)
        self.durable = gts.DirectoryDurableStore(tmp_path / "durable")
        self.routers: dict[str, gts.TenantRouter] = {}
        self.drains: dict[str, Drains] = {}
        self.calls: dict[str, HeldCall] = {}
        self.handoffs: dict[str, Background] = {}
        self.closes: dict[str, Background] = {}

    def key(self, step: Json) -> str:
        return gts.lease_key_for(self.org, step["tenant"])

    def router(self, step: Json) -> gts.TenantRouter:
        return self.routers[step["replica"]]

    def handoff(self, step: Json) -> Json:
        self.router(step).handoff(self.key(step), timeout_ms=step["timeout_ms"])
        return {"ok": True}

    def step(self, step: Json) -> Json | None:
        do = step["do"]
        if do == "start":
            drains = self.drains[step["replica"]] = Drains()
            self.routers[step["replica"]] = gts.TenantRouter(
                self.leases,
                self.durable,
                self.dir / step["replica"],
                step["replica"],
                DOC["ttl_ms"],
                DOC["margin_ms"],
                capacity=step["capacity"],
                copy_interval_ms=DOC["copy_interval_ms"],
                durability=step["durability"],
                clock=self.clock,
                on_event=drains.tell,
            )
            return None
        if do == "open":
            router = self.router(step)
            return outcome(lambda: {"epoch": router.open(self.org, step["tenant"]).epoch})
        if do == "run":
            router, key = self.router(step), self.key(step)
            return outcome(lambda: router.run(key, lambda h: append_line(h, step["line"])) or {"ok": True})
        if do == "begin":
            held = HeldCall(self.router(step), self.key(step), step["call"])
            self.calls[step["call"]] = held
            return held.begun()
        if do == "end":
            return self.calls.pop(step["call"]).end()
        if do == "handoff":
            return outcome(lambda: self.handoff(step))
        if do == "handoff_start":
            drains, key = self.drains[step["replica"]], self.key(step)
            before = drains.count(key)
            self.handoffs[step["handoff"]] = Background(lambda: self.handoff(step))
            drains.until_told(key, before)
            return None
        if do == "handoff_wait":
            return self.handoffs.pop(step["handoff"]).wait()
        if do == "close":
            return close_report(self.router(step).close(timeout_ms=step["timeout_ms"]))
        if do == "close_start":
            router, drains, key = self.router(step), self.drains[step["replica"]], self.key(step)
            before = drains.count(key)
            self.closes[step["close"]] = Background(
                lambda: close_report(router.close(timeout_ms=step["timeout_ms"]))
            )
            drains.until_told(key, before)
            return None
        if do == "close_wait":
            return self.closes.pop(step["close"]).wait()
        if do == "status":
            return [
                {
                    "tenant": t.key.rsplit("/", 1)[1],
                    "state": t.state,
                    "epoch": t.epoch,
                    "in_flight": t.in_flight,
                    "writes_since_copy": t.writes_since_copy,
                }
                for t in self.router(step).status()
            ]
        if do == "lines":
            root = Path(gts.tenant_root_for(self.dir / step["replica"], self.org, step["tenant"]))
            path = root / "lines.txt"
            return path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        if do == "advance":
            self.clock.advance(step["ms"])
            return None
        raise AssertionError(f"a step this replayer does not know: {do}")

    def close(self) -> None:
        for router in self.routers.values():
            router.close(timeout_ms=10_000)
        self.leases.close()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_router_scenario(scenario: Json, tmp_path: Path) -> None:
    site = Site(tmp_path)
    try:
        for n, step in enumerate(scenario["steps"]):
            answer = site.step(step)
            if answer is not None:
                assert answer == step["expect"], f"step {n}: {step}"
    finally:
        site.close()


def test_every_scenario_is_replayed() -> None:
    """Collection makes one test per scenario; a file the replayer reads as empty, or whose
    names collide (one would shadow another), fails here instead of passing quietly."""
    names = [s["name"] for s in SCENARIOS]
    assert len(names) >= 10 and len(set(names)) == len(names)
