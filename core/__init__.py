"""The ground floor under both apps: what annotation, metrics_app and worker all stand on.

Nothing here imports annotation, metrics_app, worker or config (the lowest layer in
.importlinter). See docs/ARCHITECTURE.md for what lives here.
"""
