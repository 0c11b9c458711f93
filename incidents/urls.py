from django.urls import path

from incidents import urls_alertmanager, urls_api, urls_review
from incidents.views import pages

urlpatterns = [
    path("incidents/", pages.index, name="index"),
    path("incidents/new/", pages.create, name="create"),
    path("incidents/<int:pk>/", pages.detail, name="detail"),
    path("incidents/<int:pk>/edit/", pages.edit, name="edit"),
    path("incidents/<int:pk>/notes/", pages.add_note, name="note"),
    path("incidents/<int:pk>/status/", pages.set_status, name="status"),
    path("incidents/<int:pk>/acknowledge/", pages.acknowledge, name="acknowledge"),
    path("incidents/<int:pk>/attach/", pages.attach, name="attach"),
    path("incidents/<int:pk>/postmortem.md", pages.export_postmortem, name="postmortem"),
    *urls_review.urlpatterns,
    *urls_alertmanager.urlpatterns,
    *urls_api.urlpatterns,
]
