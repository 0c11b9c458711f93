"""manage.py simulate: run simulated vLLM/TGI/Ollama instances on loopback until stopped.

    manage.py simulate --instances 20 --base-port 9000
    manage.py simulate --from-inventory            # the inventory's loopback instances (demo: 8101-8105)
                                                   # and gateways (demo: llm-gateway on 8080)
    manage.py simulate --scenario guide-0300-long-prompt-kv-exhaustion.yaml
    manage.py simulate --instances 1 --duration 30
    manage.py simulate --from-inventory --control-port 8199   # /_sim for all, even crashed ones

`make run` starts it with --from-inventory --control-port $SIM_CONTROL_PORT (8199), so
`manage.py fault` can inject and clear every fault, a crash or refused connections included.
With --from-inventory, each inventory gateway on http://127.0.0.1 (or localhost) runs too, as
an nginx-like proxy in front of those of its instances that are simulated
(fleet/simulator/gateway.py; PATCH /_sim/gateways/{name} on the control port changes its
added latency).

Prints one line per listening port, runs until SIGINT/SIGTERM (or --duration, or the
scenario's end), and stops cleanly. When it runs exactly one instance and that instance
crashes (the crash fault), the command exits with the instance's exit code (137), as the
process it stands for would; unless it serves a control port, where the crash can be
cleared (the instance restarts), so the command keeps running.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Sequence

from django.core.management.base import BaseCommand, CommandError, CommandParser

from fleet.simulator.fleet_runner import FleetRunner
from fleet.simulator.gateway import GatewaySpec, gateway_specs_from_inventory
from fleet.simulator.scenario_player import play
from fleet.simulator.scenarios import Scenario, ScenarioError, ScenarioEvent, load_scenario
from fleet.simulator.spec import InstanceSpec, SpecError, specs_for, specs_from_inventory


class Command(BaseCommand):
    help = "Run simulated inference engines (vLLM, TGI, Ollama) on loopback ports."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--instances", type=int, default=None, help="How many synthetic instances (default 5)."
        )
        parser.add_argument("--base-port", type=int, default=None, help="First port (default 8101).")
        parser.add_argument("--scenario", help="A scenario YAML file (a file name finds a shipped one).")
        parser.add_argument(
            "--from-inventory",
            action="store_true",
            help="Simulate the inventory's instances on 127.0.0.1/localhost.",
        )
        parser.add_argument("--duration", type=float, default=None, help="Stop after this many seconds.")
        parser.add_argument(
            "--requests-per-s", type=float, default=None, help="Background load per instance."
        )
        parser.add_argument(
            "--tick", type=float, default=None, help="Engine tick in seconds (default by fleet size)."
        )
        parser.add_argument(
            "--control-port",
            type=int,
            default=None,
            help="Also serve every instance's /_sim routes here, for manage.py fault (0: any free port).",
        )

    def handle(self, *args, **options) -> None:
        scenario = self._scenario(options)
        specs = self._specs(options, scenario)
        if not specs and options["from_inventory"]:
            # Part of `make run`: an inventory with nothing on loopback must not stop the console.
            self.stdout.write("Nothing to simulate: no enabled inventory instance is on 127.0.0.1/localhost.")
            self.stdout.write("Idling until stopped; add loopback instances and restart to simulate them.")
            self.stdout.flush()
            _wait_for_stop_signal()
            return
        if not specs:
            raise CommandError("Nothing to simulate.")
        gateways = self._gateways(options, specs)
        code = asyncio.run(self._run(specs, scenario, options, gateways))
        if code:
            raise SystemExit(code)

    def _scenario(self, options: dict) -> Scenario | None:
        if not options["scenario"]:
            return None
        if options["from_inventory"] or options["instances"] is not None:
            raise CommandError(
                "--scenario brings its own instances; leave out --instances and --from-inventory."
            )
        try:
            return load_scenario(options["scenario"])
        except ScenarioError as exc:
            raise CommandError(str(exc)) from None

    def _specs(self, options: dict, scenario: Scenario | None) -> list[InstanceSpec]:
        base_port = options["base_port"]
        if scenario is not None:
            specs = list(scenario.instances)
            return [s.with_port(base_port + i) for i, s in enumerate(specs)] if base_port else specs
        if options["from_inventory"]:
            return specs_from_inventory()
        try:
            return specs_for(
                options["instances"] or 5, base_port or 8101, requests_per_s=options["requests_per_s"]
            )
        except SpecError as exc:
            raise CommandError(str(exc)) from None

    def _gateways(self, options: dict, specs: Sequence[InstanceSpec]) -> list[GatewaySpec]:
        if not options["from_inventory"]:
            return []
        gateways, notes = gateway_specs_from_inventory(s.name for s in specs)
        for note in notes:
            self.stdout.write(note)
        return gateways

    async def _run(
        self,
        specs: Sequence[InstanceSpec],
        scenario: Scenario | None,
        options: dict,
        gateways: Sequence[GatewaySpec] = (),
    ) -> int:
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[int] = loop.create_future()

        def done(code: int) -> None:
            if not finished.done():
                finished.set_result(code)

        def crashed(inst) -> None:
            self.stdout.write(f"{inst.spec.name} exited with code {inst.exit_code}")
            self.stdout.flush()
            if len(specs) == 1 and runner.control_port is None:
                done(inst.exit_code or 1)

        runner = FleetRunner(tick_s=options["tick"], on_crash=crashed, control_port=options["control_port"])
        try:
            await runner.start(specs, gateways)
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, done, 0)
        self._announce(runner)
        duration = options["duration"] or (scenario.real_duration_s if scenario else None)
        if duration:
            loop.call_later(duration, done, 0)
        if scenario is not None:
            runner.spawn(play(scenario, runner, on_event=self._print_event))
        try:
            return await finished
        finally:
            await runner.stop()
            self.stdout.write("Simulator stopped.")

    def _announce(self, runner: FleetRunner) -> None:
        for inst in sorted(runner.instances.values(), key=lambda i: i.port):
            spec = inst.spec
            self.stdout.write(
                f"listening on http://{spec.host}:{inst.port}  {spec.engine} {spec.version}  "
                f"{spec.name}  ({spec.served_model_name})"
            )
        for gateway in runner.gateways.values():
            upstreams = ", ".join(gateway.spec.upstreams)
            self.stdout.write(
                f"gateway on {gateway.url}  {gateway.spec.kind}  {gateway.spec.name}  -> {upstreams}  "
                f"(+{gateway.added_latency_s * 1000:g} ms)"
            )
        if runner.control_port is not None:
            self.stdout.write(f"control on http://{runner.control_host}:{runner.control_port}/_sim/instances")
        self.stdout.write(f"{len(runner.instances)} instance(s) running; Ctrl-C stops them.")
        self.stdout.flush()

    def _print_event(self, event: ScenarioEvent, summary: str) -> None:
        note = f"  -- {event.note}" if event.note else ""
        self.stdout.write(f"[{event.label}] {summary}{note}")
        self.stdout.flush()


def _wait_for_stop_signal() -> None:
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    stopped.wait()
