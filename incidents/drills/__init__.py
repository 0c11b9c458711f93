"""Drills: a scenario replayed through the real probes and the alert rules on accelerated
time, against a scratch inventory made from it, with its expectations checked.

    report = run_drill(scenario=load_scenario("drill-host-down.yaml"))
    report.unmet  # ["gpu-a: at 00:03:00 expected verdict down, saw failing (process.not_started)"]

inventory.py makes and removes the scratch hosts; loop.py probes them on the scenario's
cadence; observed.py records verdicts and incidents in scenario time; checks.py holds the
expectations against what was observed; run.py puts it together; service.py is the stored
run the Drills page polls.
"""
