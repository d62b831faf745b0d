"""The site's URLs plus `/bench/bare/`: a view that does nothing, through the same middleware,
so the task page's throughput can be put in proportion to what Django itself costs here."""
from django.http import HttpRequest, HttpResponse
from django.urls import path

from config.urls import urlpatterns as site_urlpatterns


def bare(request: HttpRequest) -> HttpResponse:
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [path("bench/bare/", bare, name="bench-bare"), *site_urlpatterns]
