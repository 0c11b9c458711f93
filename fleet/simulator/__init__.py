"""The fleet simulator: vLLM, TGI and Ollama engines that behave like real ones on loopback.

For the demo (`manage.py simulate --from-inventory`), the tests and the benchmarks. Every
instance is an aiohttp server on its own port in one asyncio loop, in front of a
continuous-batching engine model (engine.py) with a KV block pool, preemption, background
traffic and faults. What to read first:

  spec.py           InstanceSpec / LoadProfile, specs_for(n, base_port), specs_from_inventory()
  fleet_runner.py   FleetRunner (async) and SimulatorThread (a context manager for tests)
  faults.py         the fault kinds and their JSON
  scenarios.py      scenario files (scenarios/README.md) and their loader
  engine.py         the scheduler; timing.py its step times; metrics.py vLLM's /metrics
"""
