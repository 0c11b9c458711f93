"""The review page's URLs (part of the incidents namespace)."""

from django.urls import path

from incidents.views import review

urlpatterns: list = [
    path("incidents/review/", review.review, name="review"),
    path("incidents/review.csv", review.review_csv, name="review-csv"),
]
