from rest_framework.routers import DefaultRouter

from fleet.api import views

router = DefaultRouter()
router.register("hosts", views.HostViewSet, basename="api-host")
router.register("gpus", views.GpuViewSet, basename="api-gpu")
router.register("instances", views.InstanceViewSet, basename="api-instance")
router.register("gateways", views.GatewayViewSet, basename="api-gateway")

urlpatterns = [
    *router.urls,
]
