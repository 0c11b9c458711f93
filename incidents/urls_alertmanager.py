"""The Alertmanager webhook receiver's URL (part of the incidents namespace)."""

urlpatterns: list = []
