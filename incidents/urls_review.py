"""The review page's URLs (part of the incidents namespace)."""

urlpatterns: list = []
