from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include("annotation.api_urls")),
    path("api/metrics/", include("metrics_app.api_urls")),
    path("", include("annotation.urls")),
    path("metrics/", include("metrics_app.urls")),
]

handler404 = "config.views.page_not_found"
