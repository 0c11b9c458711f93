"""Told when an agent answers a request (fleet.models.AgentRequest). Apps above fleet
connect to it (incidents attaches a pulled log's triage; diagnostics judges a pre-deploy
checklist) so fleet never imports them."""

from django.dispatch import Signal

# sender: AgentRequest; kwargs: request (the AgentRequest, answered)
agent_answered = Signal()
