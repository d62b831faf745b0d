"""The site boots: settings load, migrations apply, the landing page and schema answer."""
import pytest


@pytest.mark.django_db
def test_landing_page_renders(client):
    response = client.get("/")
    assert response.status_code == 200
    assert b"QA Judge" in response.content


@pytest.mark.django_db
def test_openapi_schema_is_served(client, researcher):
    client.force_login(researcher)
    response = client.get("/api/schema/")
    assert response.status_code == 200
    assert b"openapi" in response.content


@pytest.mark.django_db
def test_every_page_names_an_icon_that_exists(client):
    """Browsers asked for /favicon.ico on every page and logged a 404 in the console."""
    from django.contrib.staticfiles import finders

    assert finders.find("favicon.svg")
    for path in ("/", "/admin/login/"):
        page = client.get(path).content.decode()
        assert 'rel="icon"' in page and "favicon.svg" in page, path
