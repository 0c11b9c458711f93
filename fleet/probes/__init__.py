"""Probes of inference instances: plain async Python, no Django, nothing raises out."""
