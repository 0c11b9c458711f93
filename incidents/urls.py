from django.urls import path

from incidents import urls_alertmanager, urls_review
from incidents.views import pages

urlpatterns = [
    path("incidents/", pages.index, name="index"),
    path("incidents/<int:pk>/", pages.detail, name="detail"),
    *urls_review.urlpatterns,
    *urls_alertmanager.urlpatterns,
]
