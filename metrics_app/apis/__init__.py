"""REST endpoints of metrics_app, one class per operation: metric reports, scoring jobs and batch
scoring (`metrics`), and the cached project report (`reports`)."""
